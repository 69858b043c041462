package deploy

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// NATS users defined by nats/auth.conf. Each service connects as the user of its own name
// (see [ServiceUsers]).
const (
	// UserAdmin may do everything in the AWAKEN account; only `awaken setup` (stream and
	// bucket creation) and operators use it.
	UserAdmin = "admin"
	// UserPlatform is the agent platform: submit, resume, cancel; read results, events and
	// tickets.
	UserPlatform = "platform"
	// UserSys is the system account's user (server monitoring and cluster operations).
	UserSys = "sys"
)

// UserAPI is the api service's user (micro service "awaken", HTTP api and console): it
// reads the batch, call and ticket records and the results stream, publishes submissions,
// resume and cancel commands on behalf of its callers, and answers the micro requests it
// receives.
const UserAPI = contracts.ServiceAPI

// ServiceUsers returns the users of the services, named like the services: the five
// pipeline services and the api. Each connects with its own inbox prefix
// ([ServiceInboxPrefix]).
func ServiceUsers() []string {
	return append(contracts.PipelineServices(), UserAPI)
}

// Users returns every user of nats/auth.conf.
func Users() []string {
	return slices.Concat([]string{UserAdmin}, ServiceUsers(), []string{UserPlatform, UserSys})
}

// PasswordEnv returns the environment variable nats/auth.conf reads user's password
// from: AWAKEN_NATS_PASSWORD_ and the user in upper case with '-' as '_'.
func PasswordEnv(user string) string {
	return "AWAKEN_NATS_PASSWORD_" + strings.ToUpper(strings.ReplaceAll(user, "-", "_"))
}

// ServiceInboxPrefix is the reply-inbox prefix a service connects with; nats/auth.conf lets
// each service user subscribe only to its own, so no user can read another user's
// JetStream replies or pull deliveries.
func ServiceInboxPrefix(service string) string { return "_INBOX_" + service }

// GeneratePasswords returns a fresh random password for every user of [Users], for
// deployments that are created and thrown away by one process (tests, `awaken dev
// --secure` without configured passwords).
func GeneratePasswords() (map[string]string, error) {
	out := make(map[string]string, len(Users()))
	for _, u := range Users() {
		b := make([]byte, 18)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("deploy: password for %s: %w", u, err)
		}
		out[u] = hex.EncodeToString(b)
	}
	return out, nil
}

// AuthConfig returns nats/auth.conf for partitions partitions ([PartitionedAuthConf])
// preceded by definitions of the password variables it references, for a server that
// loads it from memory (server.Options.ProcessConfigString) instead of reading the
// variables from the environment. Every user of [Users] must have a password.
func AuthConfig(passwords map[string]string, partitions int) (string, error) {
	conf, err := PartitionedAuthConf(partitions)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, u := range Users() {
		pw := passwords[u]
		if pw == "" {
			return "", fmt.Errorf("deploy: no password for NATS user %q", u)
		}
		// A double-quoted string of the NATS configuration format, which has no escape
		// for every character: refuse the ones that would end or bend it.
		if strings.ContainsFunc(pw, func(r rune) bool { return r == '"' || r == '\\' || r < ' ' || r == 0x7f }) {
			return "", fmt.Errorf("deploy: the password of NATS user %q holds a quote, backslash or control character", u)
		}
		fmt.Fprintf(&b, "%s: \"%s\"\n", PasswordEnv(u), pw)
	}
	b.Write(conf)
	return b.String(), nil
}

// PasswordEnvironment returns the environment of a NATS server container that loads
// nats/auth.conf from disk: one PasswordEnv(user)=password entry per user.
func PasswordEnvironment(passwords map[string]string) map[string]string {
	out := make(map[string]string, len(passwords))
	for u, pw := range passwords {
		out[PasswordEnv(u)] = pw
	}
	return out
}
