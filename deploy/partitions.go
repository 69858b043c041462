package deploy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// PartitionedAuthConf returns nats/auth.conf for a deployment of partitions partitions
// (storage.partitions; 0 or 1 is one partition, returned unchanged): every grant that
// names a partitioned store or subject of partition 0 — the calls, runs and batches
// buckets, the results and audit streams, and the results, corrections and run audit
// subjects — is repeated for each partition k ≥ 1, right below it, under that
// partition's names (KV_AWAKEN_calls_p1, AWAKEN_RESULTS_P1, awaken.p1.results.>, …).
// Each user gets in every partition exactly what it has in partition 0.
//
// The file cannot say this itself: a partition's stores are names of one subject token
// (KV_AWAKEN_calls_p1) and NATS wildcards match whole tokens only, so no grant of the
// one-partition file can cover them without covering every stream of the account.
// `awaken nats-auth --partitions N` prints this file.
func PartitionedAuthConf(partitions int) ([]byte, error) {
	conf, err := ReadFile(NATSAuthConfig)
	if err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	if partitions <= 1 {
		return conf, nil
	}
	names := contracts.NewNames(contracts.DefaultPrefix)
	names.Partitions = partitions
	renames := make([]func(string) string, 0, partitions-1)
	for k := 1; k < partitions; k++ {
		renames = append(renames, partitionRename(names.Partition(0), names.Partition(k)))
	}
	var out strings.Builder
	fmt.Fprintf(&out, "# Generated for storage.partitions %d (`awaken nats-auth --partitions %d`):\n", partitions, partitions)
	fmt.Fprintf(&out, "# each grant naming a store or subject of partition 0 is repeated for partition 1 to %d.\n", partitions-1)
	for _, line := range strings.SplitAfter(string(conf), "\n") {
		out.WriteString(line)
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		grants := quoted(trimmed)
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		for _, rename := range renames {
			var copies []string
			for _, g := range grants {
				if r := rename(g); r != g {
					copies = append(copies, strconv.Quote(r))
				}
			}
			if len(copies) > 0 {
				out.WriteString(indent + strings.Join(copies, ", ") + ",\n")
			}
		}
	}
	return []byte(out.String()), nil
}

// quoted returns the double-quoted strings of one configuration line (the file's grants
// hold no escapes).
func quoted(line string) []string {
	var out []string
	for {
		i := strings.IndexByte(line, '"')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(line[i+1:], '"')
		if j < 0 {
			return out
		}
		out = append(out, line[i+1:i+1+j])
		line = line[i+1+j+1:]
	}
}

// partitionRename maps a grant of partition p0 to the same grant in partition pk: a
// token naming one of p0's partitioned stores becomes pk's store, and a subject under
// one of p0's partitioned subject prefixes moves under pk's (also when it is the filter
// inside a consumer-create API subject). The audit subjects that only partition 0's
// stream holds (tool pauses, the MCP door's calls) stay as they are.
func partitionRename(p0, pk contracts.Names) func(string) string {
	stores := map[string]string{}
	for _, pair := range [][2]string{
		{p0.CallsBucket(), pk.CallsBucket()},
		{p0.RunsBucket(), pk.RunsBucket()},
		{p0.BatchesBucket(), pk.BatchesBucket()},
		{p0.ResultsStream(), pk.ResultsStream()},
		{p0.AuditStream(), pk.AuditStream()},
	} {
		stores[pair[0]] = pair[1]
	}
	for _, b := range [][2]string{{p0.CallsBucket(), pk.CallsBucket()}, {p0.RunsBucket(), pk.RunsBucket()}, {p0.BatchesBucket(), pk.BatchesBucket()}} {
		stores["KV_"+b[0]] = "KV_" + b[1]
	}
	prefix := func(wildcard string) string { return strings.TrimSuffix(wildcard, ">") }
	subjects := [][2]string{
		{prefix(p0.ResultsWildcard()), prefix(pk.ResultsWildcard())},
		{prefix(p0.ResultCorrectionsWildcard()), prefix(pk.ResultCorrectionsWildcard())},
		{p0.AuditPrefix(), pk.AuditPrefix()},
	}
	partitionZeroOnly := []string{p0.ToolPauseAuditSubject(), p0.MCPCallAuditSubject()}
	return func(grant string) string {
		tokens := strings.Split(grant, ".")
		for i, t := range tokens {
			if r, ok := stores[t]; ok {
				tokens[i] = r
			}
		}
		for i := range tokens {
			rest := strings.Join(tokens[i:], ".")
			if slices.Contains(partitionZeroOnly, rest) {
				break
			}
			for _, s := range subjects {
				if strings.HasPrefix(rest, s[0]) {
					return strings.Join(tokens[:i], ".") + dotIf(i) + s[1] + strings.TrimPrefix(rest, s[0])
				}
			}
		}
		return strings.Join(tokens, ".")
	}
}

func dotIf(i int) string {
	if i == 0 {
		return ""
	}
	return "."
}
