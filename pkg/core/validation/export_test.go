package validation

// The slice builders of this package's tests, for the external tests
// (which may import packages that import this one: internal/testing/testgen,
// pkg/driver/mig).
var (
	PlainSlice        = plainSlice
	CountersSlice     = countersSlice
	MixinSlice        = mixinSlice
	MixinCounterSlice = mixinCounterSlice
)
