package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ErrObjectNotFound is wrapped when the objects bucket holds no object of that name: it
// never existed, or it expired with the results that linked to it.
var ErrObjectNotFound = errors.New("object not found")

// ErrObjectDigest is returned by a read of an object whose bytes do not have the SHA-256
// digest its name carries ([contracts.ObjectName]): the object was overwritten after its
// link was published (an executor credential may write the objects bucket), so its bytes
// are not the output the link names and are refused.
var ErrObjectDigest = errors.New("object bytes do not match the digest in its name")

// KeepLinks makes the client return the results as published: an output stored by
// reference stays one resource_link block ("awaken://objects/{name}"), which
// [Client.Object] or the api's GET /v1/objects/{name} read. By default the client resolves
// every such link and returns the output's content in place of it.
func KeepLinks() Option { return func(c *Client) { c.keepLinks = true } }

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Name     string
	MimeType string
	Size     int64
}

// OpenObject opens the object name for reading; the caller closes the reader. It reads
// the objects bucket with an ordered consumer, chunk by chunk, so a large object is never
// held in memory whole. The reader verifies the bytes against the digest in the name: a
// mismatch ends the read with [ErrObjectDigest] instead of io.EOF.
func (c *Client) OpenObject(ctx context.Context, name string) (io.ReadCloser, ObjectInfo, error) {
	if err := contracts.ValidateObjectName(name); err != nil {
		return nil, ObjectInfo{}, fmt.Errorf("client: object %q: %w: %w", name, ErrObjectNotFound, err)
	}
	st, err := c.objectStore(ctx)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	res, err := st.Get(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, ObjectInfo{}, fmt.Errorf("client: object %s: %w", name, ErrObjectNotFound)
	}
	if err != nil {
		return nil, ObjectInfo{}, fmt.Errorf("client: object %s: %w", name, err)
	}
	info, err := res.Info()
	if err != nil {
		_ = res.Close()
		return nil, ObjectInfo{}, fmt.Errorf("client: object %s: %w", name, err)
	}
	want, ok := nameDigest(name)
	if !ok {
		_ = res.Close()
		return nil, ObjectInfo{}, fmt.Errorf("client: object %s: %w (the name carries no digest)", name, ErrObjectDigest)
	}
	return &verifiedObject{r: res, name: name, want: want, h: sha256.New()},
		ObjectInfo{Name: name, MimeType: info.Headers.Get("Content-Type"), Size: int64(info.Size)}, nil
}

// nameDigest returns the hex digest prefix an object name ends with (after its last dot).
func nameDigest(name string) (string, bool) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 || len(name)-i-1 != 16 {
		return "", false
	}
	d := name[i+1:]
	if _, err := hex.DecodeString(d); err != nil {
		return "", false
	}
	return strings.ToLower(d), true
}

// verifiedObject hashes what it reads and, at the end, refuses bytes whose digest is not
// the one the name carries: the last Read returns ErrObjectDigest instead of io.EOF.
type verifiedObject struct {
	r    io.ReadCloser
	name string
	want string
	h    hash.Hash
	err  error
}

func (v *verifiedObject) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(v.h.Sum(nil))[:len(v.want)]; got != v.want {
			v.err = fmt.Errorf("client: object %s: %w (read %s…)", v.name, ErrObjectDigest, got)
			return n, v.err
		}
		v.err = io.EOF
	}
	return n, err
}

func (v *verifiedObject) Close() error { return v.r.Close() }

// Object reads the whole object name.
func (c *Client) Object(ctx context.Context, name string) ([]byte, ObjectInfo, error) {
	r, info, err := c.OpenObject(ctx, name)
	if err != nil {
		return nil, info, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, info, fmt.Errorf("client: object %s: %w", name, err)
	}
	return data, info, nil
}

// objectStore returns the objects bucket's handle, looked up once per client.
func (c *Client) objectStore(ctx context.Context) (jetstream.ObjectStore, error) {
	return c.objects.get("objects bucket", func() (jetstream.ObjectStore, error) {
		return c.js.ObjectStore(ctx, c.names.ObjectsBucket())
	})
}

// ResolveLinks returns out with every resource_link to the objects bucket replaced by the
// content it stands for: the text block of a text object, the content blocks of a content
// object. Links to anything else, and objects of another media type, are kept.
func (c *Client) ResolveLinks(ctx context.Context, out contracts.ToolOutput) (contracts.ToolOutput, error) {
	if !hasObjectLink(out.Content) {
		return out, nil
	}
	content := make([]contracts.ContentBlock, 0, len(out.Content))
	for _, b := range out.Content {
		name, ok := contracts.ObjectNameOfURI(b.URI)
		if b.Type != contracts.BlockResourceLink || !ok {
			content = append(content, b)
			continue
		}
		data, info, err := c.Object(ctx, name)
		if err != nil {
			return out, err
		}
		switch info.MimeType {
		case contracts.MimeTypeText:
			content = append(content, contracts.ContentBlock{Type: contracts.BlockText, Text: string(data)})
		case contracts.MimeTypeContent:
			var blocks []contracts.ContentBlock
			if err := json.Unmarshal(data, &blocks); err != nil {
				return out, fmt.Errorf("client: object %s: %w", name, err)
			}
			content = append(content, blocks...)
		default:
			content = append(content, b)
		}
	}
	out.Content = content
	return out, nil
}

func hasObjectLink(blocks []contracts.ContentBlock) bool {
	for _, b := range blocks {
		if _, ok := contracts.ObjectNameOfURI(b.URI); b.Type == contracts.BlockResourceLink && ok {
			return true
		}
	}
	return false
}

// resolveBatch resolves the links of every result of b in place, unless the client keeps
// links.
func (c *Client) resolveBatch(ctx context.Context, b *BatchResult) error {
	if c.keepLinks || b == nil {
		return nil
	}
	for i := range b.Results {
		out, err := c.ResolveLinks(ctx, b.Results[i].Output)
		if err != nil {
			return fmt.Errorf("client: resolving the output of %s: %w", b.Results[i].CallID, err)
		}
		b.Results[i].Output = out
	}
	return nil
}
