// Package starflowtype holds the domain types shared by every layer of
// Starflow: runs, step ledger rows, events, checkpoints, leases, the status
// vocabularies of SPEC §3 and Appendix A, and the sentinel errors.
//
// Import rule: this package imports only the standard library. Every other
// package may import it; it imports none of them. (The model is River's
// rivertype package.)
package starflowtype
