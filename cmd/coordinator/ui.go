//go:build !js && !wasip1

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/lease-fence/lease-fence/service/auth"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/wasm/js"
	"github.com/lease-fence/lease-fence/web"
)

// uiPrefix is where -ui serves the console; uiRejectionsPath is the one
// call it adds, the gates' refusals (-ui-gates), read under the same
// tokens and scopes as /v1/watch.
const (
	uiPrefix         = "/ui/"
	uiRejectionsPath = "/ui/api/rejections"
)

// uiPolicy is the Content-Security-Policy of every console file: scripts
// and styles from the coordinator's own origin only (no inline script, no
// style attribute), calls to the same origin, nothing framed or framing.
const uiPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// uiFile is one embedded file of the console, with what its answer needs.
type uiFile struct {
	data  []byte
	etag  string
	ctype string
}

// console serves the console's files at /ui/ and, behind the tokens as
// the API is, the refusals of the gates at /ui/api/rejections.
type console struct {
	files map[string]uiFile // by name under /ui/; "" is the page
	gates *gateRelay        // nil without -ui-gates
	guard *auth.Guard       // nil without -auth
}

// newConsole reads the embedded files once: each answer is then a
// lookup, with an ETag from its content. The files of js.Console are
// served at their base names, beside web.Console's.
func newConsole(gates *gateRelay, guard *auth.Guard) (*console, error) {
	c := &console{files: map[string]uiFile{}, gates: gates, guard: guard}
	for _, files := range []fs.FS{web.Console, js.Console} {
		err := fs.WalkDir(files, ".", func(name string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := fs.ReadFile(files, name)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			ext := path.Ext(name)
			ctype := mime.TypeByExtension(ext)
			if ext == ".js" || ext == ".mjs" {
				ctype = "text/javascript; charset=utf-8" // whatever the system's MIME table says
			}
			f := uiFile{data: data, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, ctype: ctype}
			c.files[path.Base(name)] = f
			if name == web.ConsolePage {
				c.files[""] = f
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == uiRejectionsPath {
		c.rejections(w, r)
		return
	}
	if !getOrHead(w, r) {
		return
	}
	name := strings.TrimPrefix(r.URL.Path, uiPrefix)
	f, ok := c.files[name]
	if !ok || name == web.ConsolePage {
		httpapi.WriteError(w, wire.NewError(wire.CodeNotFound, "the console has no file "+quoteName(name)))
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.ctype)
	h.Set("Content-Security-Policy", uiPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	// Revalidated at each load (the files change with the binary), and
	// answered 304 when unchanged.
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", f.etag)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.data))
}

// rejections answers GET /ui/api/rejections: the gates' refusals as
// Server-Sent Events, only those of resources the token sees.
func (c *console) rejections(w http.ResponseWriter, r *http.Request) {
	if !getOrHead(w, r) {
		return
	}
	allow := func(string) bool { return true }
	if c.guard != nil {
		t, e := c.guard.Authenticate(r)
		if e != nil {
			auth.Refuse(w, e)
			return
		}
		allow = t.Sees
	}
	if c.gates == nil {
		httpapi.WriteError(w, wire.NewError(wire.CodeNotSupported, "this coordinator relays no gate's refusals: start it with -ui-gates URL,..."))
		return
	}
	c.gates.serve(w, r, allow)
}

func quoteName(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}
