package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// BlobThresholdDefault is the size above which a checkpoint's output or
// context delta is stored once in workflow_blobs, by sha256, and the
// checkpoint row holds a reference instead (SPEC §4: 256 KiB).
const BlobThresholdDefault = 256 << 10

// blobKey is the reserved key of a blob reference: engine internals use the
// __celestial prefix, which definitions may not write.
const blobKey = "__celestialBlob"

// BlobRef returns the reference stored in place of data and data's sha256
// (hex). The reference is {"__celestialBlob":"<sha256>","size_bytes":N}.
func BlobRef(data []byte) (ref json.RawMessage, sum string) {
	h := sha256.Sum256(data)
	sum = hex.EncodeToString(h[:])
	ref, _ = json.Marshal(map[string]any{blobKey: sum, "size_bytes": len(data)})
	return ref, sum
}

// ParseBlobRef reports whether raw is a blob reference and returns its
// sha256 (hex).
func ParseBlobRef(raw []byte) (sum string, ok bool) {
	if !bytes.HasPrefix(bytes.TrimSpace(raw), []byte(`{"`+blobKey+`"`)) {
		return "", false
	}
	var ref map[string]any
	if json.Unmarshal(raw, &ref) != nil || len(ref) != 2 {
		return "", false
	}
	s, ok := ref[blobKey].(string)
	return s, ok && len(s) == 64
}
