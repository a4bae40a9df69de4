package validation

// MigSlice lets the external tests (which may import internal/testgen, as
// this package's own tests may not) use the MIG slice helper.
var MigSlice = migSlice
