//go:build !k8s138

package app

// builtFor is the Kubernetes minor this build's kube-scheduler is, for
// binaries without module information (test binaries); the release comes
// from the build information where there is one. Each minor's module
// builds with its tag (docs/versions.md).
const builtFor = "1.37"
