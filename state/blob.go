package state

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// BlobThresholdDefault is the size above which a checkpoint's output or
// context delta is stored once in workflow_blobs, by sha256, and the
// checkpoint row holds a reference instead (SPEC §4: 256 KiB).
const BlobThresholdDefault = 256 << 10

// blobKey is the key of a blob reference's placeholder: engine internals
// use the __celestial prefix, which step outputs may not hold.
const blobKey = "__celestialBlob"

// BlobRef returns the placeholder a checkpoint row holds in place of data
// (outputs_json or context_json), and data's sha256 (hex), which the row's
// outputs_blob or context_blob column holds. The placeholder is
// {"__celestialBlob":"<sha256>","size_bytes":N}, for people and outside
// tools reading the table.
//
// Only the blob column marks a reference (issue 10 item 3): a store never
// dereferences a value because of its shape, so a step output shaped like
// a placeholder is read back as written and cannot reach another run's
// blob.
func BlobRef(data []byte) (ref json.RawMessage, sum string) {
	h := sha256.Sum256(data)
	sum = hex.EncodeToString(h[:])
	ref, _ = json.Marshal(map[string]any{blobKey: sum, "size_bytes": len(data)})
	return ref, sum
}
