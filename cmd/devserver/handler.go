package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"time"
)

// ModulePrefix is the URL path under which the module folder is served. The
// page imports /lease-fence/lease-fence.mjs.
const ModulePrefix = "/lease-fence/"

// ContentSecurityPolicy is sent with every response. The page loads only
// same-origin scripts, styles and the wasm module; 'wasm-unsafe-eval' lets it
// compile WebAssembly and nothing else, and the hash allows the page's one
// inline script, its import map (handler_test.go checks the hash matches). web/index.html repeats it in a meta
// tag so the page keeps the policy when served by another server.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval' 'sha256-nwCHSovA9E+dQssuzjfIwGxGtpsf7ms2nZgWGlD8hSg='; " +
	"style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'none'"

// maxGzipSize bounds the files compressed and cached in memory.
const maxGzipSize = 32 << 20

// contentTypes maps the extensions the playground uses to their media types.
// Anything else is served as application/octet-stream.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".mjs":  "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".wasm": "application/wasm",
	".svg":  "image/svg+xml",
	".json": "application/json",
	".ts":   "text/plain; charset=utf-8",
	".md":   "text/plain; charset=utf-8",
	".txt":  "text/plain; charset=utf-8",
	".png":  "image/png",
	".ico":  "image/x-icon",
}

// compressible lists the extensions served gzip-compressed to clients that
// accept it.
var compressible = map[string]bool{
	".html": true, ".js": true, ".mjs": true, ".css": true, ".wasm": true,
	".svg": true, ".json": true, ".ts": true, ".md": true, ".txt": true,
}

// Handler serves the page folder at / and the module folder at ModulePrefix.
// It answers GET and HEAD only, serves regular files only, and refuses any
// path with a dot segment (.., ., or a hidden name), a backslash or a NUL, so
// nothing outside the two folders is reachable; the folders are opened as
// os.Root, which also stops symbolic links from leading out. A directory is
// served as its index.html when it has one and is otherwise not found: there
// are no listings. Create it with NewHandler and Close it when done.
type Handler struct {
	web, module *os.Root

	mu   sync.Mutex
	gzip map[string]*gzEntry // key: root name + path
}

type gzEntry struct {
	mod  time.Time
	size int64
	done chan struct{} // closed once data and err are set
	data []byte
	err  error
}

// NewHandler opens the two folders.
func NewHandler(webDir, moduleDir string) (*Handler, error) {
	web, err := os.OpenRoot(webDir)
	if err != nil {
		return nil, fmt.Errorf("page folder: %w", err)
	}
	module, err := os.OpenRoot(moduleDir)
	if err != nil {
		web.Close()
		return nil, fmt.Errorf("module folder: %w (run make build-wasm first)", err)
	}
	return &Handler{web: web, module: module, gzip: make(map[string]*gzEntry)}, nil
}

// Close releases the folders.
func (h *Handler) Close() error {
	return errors.Join(h.web.Close(), h.module.Close())
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	setSecurityHeaders(hdr)

	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	root, rel, ok := h.resolve(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	f, info, rel, ok := open(root, rel)
	if !ok {
		http.NotFound(w, r)
		return
	}
	defer f.Close()

	ext := strings.ToLower(path.Ext(rel))
	ctype, known := contentTypes[ext]
	if !known {
		ctype = "application/octet-stream"
	}
	hdr.Set("Content-Type", ctype)
	// Revalidate every time: this is a development server and the files
	// change under it; Last-Modified/ETag make the revalidation cheap.
	hdr.Set("Cache-Control", "no-cache")

	if compressible[ext] && info.Size() <= maxGzipSize && acceptsGzip(r) {
		hdr.Add("Vary", "Accept-Encoding")
		data, err := h.compressed(root, rel, info)
		if err != nil {
			http.Error(w, "read error", http.StatusInternalServerError)
			return
		}
		hdr.Set("Content-Encoding", "gzip")
		hdr.Set("ETag", etag(info, "gz"))
		http.ServeContent(w, r, "", info.ModTime(), bytes.NewReader(data))
		return
	}
	if compressible[ext] {
		hdr.Add("Vary", "Accept-Encoding")
	}
	hdr.Set("ETag", etag(info, "id"))
	http.ServeContent(w, r, "", info.ModTime(), f)
}

// resolve maps a URL path to a folder and a slash-separated path inside it,
// or reports false for any path that is not plainly inside one.
func (h *Handler) resolve(p string) (*os.Root, string, bool) {
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") {
		return nil, "", false
	}
	root, rest := h.web, p[1:]
	if p+"/" == ModulePrefix {
		rest = ""
		root = h.module
	} else if strings.HasPrefix(p, ModulePrefix) {
		root, rest = h.module, p[len(ModulePrefix):]
	}
	segs := strings.Split(rest, "/")
	for i, s := range segs {
		last := i == len(segs)-1
		switch {
		case s == "" && (last || i == 0 && len(segs) == 1):
			// trailing slash or the folder itself
		case s == "":
			return nil, "", false // "//" inside the path
		case strings.HasPrefix(s, "."):
			return nil, "", false // "..", "." and hidden names
		}
	}
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" {
		rest = "."
	}
	return root, rest, true
}

// open opens rel in root, serving a directory's index.html and refusing
// anything that is not a regular file.
func open(root *os.Root, rel string) (*os.File, fs.FileInfo, string, bool) {
	f, err := root.Open(rel)
	if err != nil {
		return nil, nil, "", false
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, "", false
	}
	if info.IsDir() {
		f.Close()
		rel = path.Join(rel, "index.html")
		if f, err = root.Open(rel); err != nil {
			return nil, nil, "", false
		}
		if info, err = f.Stat(); err != nil {
			f.Close()
			return nil, nil, "", false
		}
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, nil, "", false
	}
	return f, info, rel, true
}

// compressed returns the gzip encoding of rel, from the cache when the file
// has not changed since it was compressed. Concurrent requests for the same
// file wait for one compression.
func (h *Handler) compressed(root *os.Root, rel string, info fs.FileInfo) ([]byte, error) {
	key := root.Name() + "\x00" + rel
	h.mu.Lock()
	e, ok := h.gzip[key]
	if ok && e.mod.Equal(info.ModTime()) && e.size == info.Size() {
		h.mu.Unlock()
		<-e.done
		return e.data, e.err
	}
	e = &gzEntry{mod: info.ModTime(), size: info.Size(), done: make(chan struct{})}
	h.gzip[key] = e
	h.mu.Unlock()
	defer close(e.done)
	e.data, e.err = gzipFile(root, rel)
	if e.err != nil {
		h.mu.Lock()
		delete(h.gzip, key)
		h.mu.Unlock()
	}
	return e.data, e.err
}

func gzipFile(root *os.Root, rel string) ([]byte, error) {
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := io.Copy(zw, io.LimitReader(f, maxGzipSize)); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Warm compresses the compressible files at the top of both folders, so the
// first page load does not wait for the wasm to be compressed.
func (h *Handler) Warm() {
	for _, root := range []*os.Root{h.web, h.module} {
		dir, err := root.Open(".")
		if err != nil {
			continue
		}
		entries, err := dir.ReadDir(-1)
		dir.Close()
		if err != nil {
			continue
		}
		for _, ent := range entries {
			name := ent.Name()
			if strings.HasPrefix(name, ".") || !compressible[strings.ToLower(path.Ext(name))] {
				continue
			}
			info, err := ent.Info()
			if err != nil || !info.Mode().IsRegular() || info.Size() > maxGzipSize {
				continue
			}
			_, _ = h.compressed(root, name, info) // a failure is retried on request
		}
	}
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") {
			q = strings.ReplaceAll(strings.TrimSpace(q), " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

func etag(info fs.FileInfo, variant string) string {
	return fmt.Sprintf(`"%x-%x-%s"`, info.ModTime().UnixNano(), info.Size(), variant)
}
