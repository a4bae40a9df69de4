package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dractl/dractl/pkg/core/validation"
)

// addKubeVersionFlag registers --kube-version on a verb that judges input
// as kube-apiserver admission would.
func addKubeVersionFlag(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "kube-version", "", fmt.Sprintf(
		"judge objects as this kube-apiserver minor does (%s; default: %s, and where the minors disagree each verdict is given)",
		validation.SupportedList(), validation.Newest()))
}

// targetVersion is the minor named by --kube-version, nil when none was.
func (o *inputOptions) targetVersion() (*validation.KubeVersion, error) {
	if o.kubeVersion == "" {
		return nil, nil
	}
	v, err := validation.ParseKubeVersion(o.kubeVersion)
	if err != nil {
		return nil, usageErrorf("--kube-version: %v", err)
	}
	return &v, nil
}

// judgedAs is the minor a verb that needs exactly one judges for: the
// named one or the newest supported.
func judgedAs(v *validation.KubeVersion) validation.KubeVersion {
	if v == nil {
		return validation.Newest()
	}
	return *v
}
