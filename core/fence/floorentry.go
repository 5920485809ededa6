package fence

// Floor is one resource's floor as a gate that keeps many resources lists
// it: the highest fence admitted and the holder that first reached it.
type Floor struct {
	Resource string
	HolderID string
	Fence    uint64
}
