package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// fileVersion is written into every state file; a file of another version is
// refused rather than guessed at.
const fileVersion = 1

type fileImage struct {
	Version   int              `json:"version"`
	Resources map[string]State `json:"resources"`
}

// FileStore is a Store in one local JSON file. Every Save rewrites the file
// the durable way: write a temporary file beside it, fsync it, rename it
// over the old one, fsync the directory. A crash at any point leaves either
// the old file or the new one, never a mix, and Save returns only after the
// new one is on disk. Saves that arrive while a write is under way are
// written together by the next one (group commit), so concurrent holders
// share the cost of an fsync. Each write holds every resource, so it suits a
// coordinator of a modest number of resources (thousands, not millions).
type FileStore struct {
	path string

	mu      sync.Mutex
	all     map[string]State // what the file on disk holds
	queue   []*pendingSave   // saves waiting for the next write
	writing bool             // a Save is writing batches
}

type pendingSave struct {
	st   State
	done chan error
}

var _ Store = (*FileStore)(nil)

// OpenFileStore reads path, or starts empty if it does not exist. A file
// that cannot be read or parsed is an error: starting empty instead would
// reissue fences the resources have already seen.
func OpenFileStore(path string) (*FileStore, error) {
	fs := &FileStore{path: path, all: make(map[string]State)}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fs, nil
	}
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var img fileImage
	if err := dec.Decode(&img); err != nil {
		return nil, errors.New("wire: state file " + path + " is unreadable: " + err.Error())
	}
	if img.Version != fileVersion {
		return nil, errors.New("wire: state file " + path + " has an unknown version")
	}
	for name, st := range img.Resources {
		if st.Resource != name {
			return nil, errors.New("wire: state file " + path + " is inconsistent at " + quoteShort(name))
		}
		fs.all[name] = st
	}
	return fs, nil
}

// Path returns the file's path.
func (fs *FileStore) Path() string { return fs.path }

// Load returns the state of resource.
func (fs *FileStore) Load(_ context.Context, resource string) (State, bool, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	st, ok := fs.all[resource]
	return copyState(st), ok, nil
}

// Resources returns the names of every stored resource, sorted.
func (fs *FileStore) Resources() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	names := make([]string, 0, len(fs.all))
	for n := range fs.all {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Save replaces the state of st.Resource and writes the file durably. If
// writing fails, the store keeps its previous contents for every save of
// that write.
func (fs *FileStore) Save(_ context.Context, st State) error {
	p := &pendingSave{st: copyState(st), done: make(chan error, 1)}
	fs.mu.Lock()
	fs.queue = append(fs.queue, p)
	if fs.writing {
		fs.mu.Unlock()
		return <-p.done
	}
	fs.writing = true
	for len(fs.queue) > 0 {
		batch := fs.queue
		fs.queue = nil
		next := make(map[string]State, len(fs.all)+len(batch))
		for k, v := range fs.all {
			next[k] = v
		}
		for _, b := range batch {
			next[b.st.Resource] = b.st
		}
		fs.mu.Unlock()
		err := fs.write(next)
		fs.mu.Lock()
		if err == nil {
			fs.all = next
		}
		for _, b := range batch {
			b.done <- err
		}
	}
	fs.writing = false
	fs.mu.Unlock()
	return <-p.done
}

func (fs *FileStore) write(all map[string]State) error {
	data, err := json.Marshal(fileImage{Version: fileVersion, Resources: all})
	if err != nil {
		return err
	}
	dir := filepath.Dir(fs.path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(fs.path)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			_ = os.Remove(name)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(name, fs.path); err != nil {
		return err
	}
	ok = true
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
