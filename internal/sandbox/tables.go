package sandbox

import (
	"errors"
	"fmt"
)

// MaxTableElements bounds the table of a tool module: its initial size and every
// table.grow. wazero keeps a table as a slice of 8-byte references in host memory, outside
// the linear memory that memory_limit_mib bounds, so without this a module growing a table
// by 100M entries took 800 MB of the process. 1Mi entries is
// 8 MiB, far above what real programs declare (a Go wasip1 program's function table holds
// one entry per function: some thousands).
const MaxTableElements = 1 << 20

// maxTables is how many tables a tool module may define. WebAssembly 2.0 (reference types)
// allows several; compilers emit one, and the bound of [MaxTableElements] is per module.
const maxTables = 1

// boundTables returns binary with the maximum of its table capped at [MaxTableElements]:
// a table.grow past it fails (yields -1 in the module, as the specification allows a grow
// to fail), so no module can make the host allocate more table than the bound. A module
// with more than one table, or whose table starts above the bound, is refused. binary
// must be a WebAssembly module; its other sections are returned unchanged.
func boundTables(binary []byte) ([]byte, error) {
	const tableSectionID = 4
	if len(binary) < 8 {
		return binary, nil // not a module: the compiler says why
	}
	pos := 8
	for pos < len(binary) {
		id := binary[pos]
		size, n := readULEB32(binary[pos+1:])
		if n == 0 || pos+1+n+int(size) > len(binary) {
			return binary, nil // malformed: left to the compiler
		}
		body := binary[pos+1+n : pos+1+n+int(size)]
		if id != tableSectionID {
			pos += 1 + n + int(size)
			continue
		}
		payload, err := capTableSection(body)
		if err != nil {
			return nil, err
		}
		out := make([]byte, 0, len(binary)+8)
		out = append(out, binary[:pos]...)
		out = append(out, tableSectionID)
		out = appendULEB32(out, uint32(len(payload)))
		out = append(out, payload...)
		out = append(out, binary[pos+1+n+int(size):]...)
		return out, nil
	}
	return binary, nil
}

// errTableSection is wrapped by capTableSection for a table section it cannot read.
var errTableSection = errors.New("unreadable table section")

// capTableSection re-encodes the payload of a table section with every table's maximum
// at most [MaxTableElements].
func capTableSection(body []byte) ([]byte, error) {
	count, n := readULEB32(body)
	if n == 0 {
		return nil, errTableSection
	}
	if count > maxTables {
		return nil, fmt.Errorf("defines %d tables; a tool module may define at most %d", count, maxTables)
	}
	p := n
	out := appendULEB32(nil, count)
	for range count {
		if p+2 > len(body) {
			return nil, errTableSection
		}
		refType, flags := body[p], body[p+1]
		p += 2
		if flags > 1 {
			return nil, fmt.Errorf("%w: table limits flags 0x%x", errTableSection, flags)
		}
		minimum, n := readULEB32(body[p:])
		if n == 0 {
			return nil, errTableSection
		}
		p += n
		maximum := uint32(MaxTableElements)
		if flags == 1 {
			declared, n := readULEB32(body[p:])
			if n == 0 {
				return nil, errTableSection
			}
			p += n
			maximum = min(declared, maximum)
		}
		if minimum > MaxTableElements {
			return nil, fmt.Errorf("declares a table of %d initial entries, above the limit of %d", minimum, MaxTableElements)
		}
		out = append(out, refType, 1)
		out = appendULEB32(out, minimum)
		out = appendULEB32(out, max(maximum, minimum))
	}
	if p != len(body) {
		return nil, errTableSection
	}
	return out, nil
}

// appendULEB32 appends v as unsigned LEB128.
func appendULEB32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
