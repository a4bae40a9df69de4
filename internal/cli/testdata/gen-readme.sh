#!/usr/bin/env bash
# Writes README.md to stdout with the real output of bin/dractl, so that the
# examples in the README are never edited by hand: `make readme`.
set -uo pipefail
B=bin/dractl
run() { # prints "$ cmd" then stdout+stderr, then the exit code
	echo "\$ $*"
	local cmd="${*/dractl/$B}"
	bash -c "$cmd" 2>&1
	echo "[exit $?]"
}
cat <<'EOF'
# dractl

dractl is a command-line tool for the ResourceSlices of Kubernetes Dynamic
Resource Allocation (DRA), covering partitionable devices
([KEP-4815](https://github.com/kubernetes/enhancements/issues/4815)) and
ResourceSlice mixins
([KEP-5234](https://github.com/kubernetes/enhancements/issues/5234)). It reads
the same manifests `kubectl` does, checks them the way kube-apiserver admission
and the scheduler would, and rewrites slices between their flat
`resource.k8s.io/v1` form and their compact mixin form.

It is written for DRA driver authors, who want to know before publishing that
their slices are valid, that the pool they form is consistent, that the mixin
form means the same as the flat one, and how many bytes mixins save; and for
cluster operators and scheduler developers, who want to inspect what drivers
publish (`kubectl get resourceslices -o yaml | dractl validate -f -`).

## Install

    go install ./cmd/dractl      # into $(go env GOBIN)
    make build                   # into bin/dractl

dractl needs Go 1.26 and nothing else.

## Set up and check

    make demo    # builds bin/dractl and runs every verb on the examples; ends with a simulate run writing bin/simulate-report.html
    make test    # gofmt check, go vet, go test -race ./..., 500 executions of each fuzz target, make e2e (installs Debian's chromium if missing)

`make e2e` runs the tests that need a cluster against a real
kube-apiserver, embedded etcd and resourceclaim controller started in the
test process ([e2e/README.md](e2e/README.md)); its first build compiles
kube-apiserver from source, about 20 minutes on 2 idle cores, and later
runs take a few minutes. `make unit` is the quick loop without it.
`make fuzz` runs each fuzz target for 30s (`FUZZTIME=2m make fuzz` for
longer); `make golden` rewrites the CLI's golden files after an intended
change (review the diff). CI runs `bash .ci/run`, which does `make test` and
`make demo`.

## Usage

Every verb reads its inputs with `-f`: a file, a directory (its `.yaml`,
`.yml` and `.json` files; with `-R` also those in directories below it) or
`-` for stdin (once); `-f` may be repeated. Files are split into documents
exactly as kubectl splits them: YAML documents separated by `---`, JSON
values (a JSON stream that meets a `---` line goes on as YAML), or
`kind: List` documents. Decoding is strict, like `kubectl apply` with
server-side field validation: unknown and duplicate fields, wrong types and
malformed quantities are errors, and so are two objects of one kind,
namespace and name (the error names both places). `resource.k8s.io/v1beta1`
and `v1beta2` objects are read and converted to v1 as kube-apiserver does
(`pkg/convert`). Objects of kinds dractl has no rules for (Namespace,
Deployment, CRDs, ...) are read with only apiVersion, kind and metadata.name
required, counted, and otherwise left alone. An object larger than
kube-apiserver's 3 MiB request limit is an error without being parsed
(`--max-object-size 10Mi` raises the limit). Every error names where it is
(`file#document`, `Kind/name`, field path), what was expected and what was
found. `-o yaml` (default) or `-o json` selects the output format of the verbs
that print objects.

### validate

Checks every object against admission rules (ResourceSlice with and without
mixins, DeviceClass, ResourceClaim, ResourceClaimTemplate; Node and Pod are
only decoded, other kinds only read), then groups the ResourceSlices into pools
(driver + pool name, highest generation) and checks the rules that span
slices: device and counter set names unique in the pool, every consumed
counter set and counter exists, one `resourceSliceCount`. Errors go to
stdout, one per line, followed by a summary. A pool with fewer (or more)
slices than its `resourceSliceCount` is a warning: the scheduler skips it
until it is complete, which is normal while a driver publishes; so is a
reference such a pool cannot resolve yet.

EOF
echo '```console'
run dractl validate -f examples/dgx-h100-mixins
echo
echo '$ grep "^kind:" internal/cli/testdata/input/namespace-demo.yaml   # a demo file as drivers ship them'
grep "^kind:" internal/cli/testdata/input/namespace-demo.yaml
run dractl validate -f internal/cli/testdata/input/namespace-demo.yaml
echo
run dractl validate -f internal/cli/testdata/bad
echo '```'
cat <<'EOF'

For CI pipelines, `-o json` prints one `ValidationReport` with every problem
as an object (file, document, line, kind, name, namespace, pool, field path,
type, message, severity) and a summary; the schema is documented and stable
([docs/output.md](docs/output.md)):

EOF
echo '```console'
run dractl validate -o json -f internal/cli/testdata/bad/missing-counter-set.yaml
echo '```'
cat <<'EOF'

The lines have the shape `<file>#<doc> <Kind>/<name>: <field path>: <message>`
or, for pool problems, `pool <driver>/<pool>: ResourceSlice <name> (<file>#<doc>): <field path>: <message>`.
The inputs above are [internal/cli/testdata/bad](internal/cli/testdata/bad);
each file says what is wrong with it.

### flatten

Applies every mixin include and prints the slices as plain
`resource.k8s.io/v1` ResourceSlices, which a kube-apiserver without the
`DRAResourceSliceMixins` feature accepts. Other objects (DeviceClasses,
claims, Nodes) are printed unchanged, so the output of a whole example
directory can go straight to `kubectl apply -f -`. With `-o json` several
objects are printed as one `v1` `List`.

A mixin slice may be valid while its flattened form breaks a v1 per-slice
limit (more than 64 devices with counters, 8 counter sets). flatten splits
such a slice as a driver built on `pkg/driverkit` publishes it (one
splitter, `pkg/flatten`): the pieces are named `<name>-0`, `<name>-1`, ...,
and every slice of the pool declares the pool's new `resourceSliceCount`,
so flatten a pool's slices together. What no split fixes (more than 32
counters in a set, more than 2 counter consumptions per device) is checked
with v1 admission and printed on stderr as a warning; with `--strict` such
problems are errors and the exit code is 1.

EOF
echo '```console'
echo '$ grep -A13 "^  devices:" examples/a100-mig-mixins/resourceslices.yaml   # the input: a device with includes'
grep -A13 "^  devices:" examples/a100-mig-mixins/resourceslices.yaml
echo
echo '$ dractl flatten -f examples/a100-mig-mixins/resourceslices.yaml | grep -A40 "^  devices:"   # the same device, flattened'
$B flatten -f examples/a100-mig-mixins/resourceslices.yaml | grep -A40 "^  devices:"
echo '...'
echo
run dractl flatten --strict -f internal/cli/testdata/v1-unsplittable.yaml '>' /dev/null
echo '```'
cat <<'EOF'

### compact

Rewrites each slice into mixin form (`pkg/compact`): attributes, capacities
and counters that several devices, counter consumptions or counter sets share
move into mixins (`d<n>`, `c<n>`, `s<n>`) that they include. Flattening the
result gives back the input's devices and counter sets; the tests check this
through the CLI on every example (`dractl compact | dractl flatten -f -`). The
slices go to stdout, the sizes (compact JSON encoding) to stderr. A slice
whose rewrite would not be smaller, such as a hand-tuned mixin slice, is
printed unchanged.

Flags: `--max-device-mixins`, `--max-consumption-mixins`,
`--max-counter-set-mixins`, `--max-device-includes`,
`--max-consumption-includes`, `--max-counter-set-includes` lower the
KEP-5234 limits compact works within (0 means the KEP limit);
`--skip-devices`, `--skip-consumptions`, `--skip-counter-sets` leave one kind
of entry flat. `--repack` lets the slices of a complete pool exchange devices
and counter sets so that the pool needs fewer slices, and so fewer copies of
each mixin (the flat DGX H100 pool: 161,582 → 36,273 bytes, 4.45×).

EOF
echo '```console'
run dractl compact -f examples/a100-mig-flat/resourceslices.yaml '>' /tmp/compacted.yaml
echo
echo '$ grep -A14 "^  devices:" /tmp/compacted.yaml   # the first device, now with includes'
grep -A14 "^  devices:" /tmp/compacted.yaml
echo
run dractl compact -f examples/a100-mig-mixins '>' /dev/null
echo '```'
cat <<'EOF'

### allocate and explain

`allocate` reads Nodes, DeviceClasses, ResourceSlices, ResourceClaims,
ResourceClaimTemplates and Pods. Claims that already have `status.allocation`
are in use (their devices, counters and consumed capacity). Each pod's claims
(named ones, and ones made from templates exactly as the resourceclaim
controller makes them) are allocated together, on a node the pod may use
(its `nodeName`, `nodeSelector` and required node affinity), one pod after
the other; pending claims that no pod uses are allocated together first, as
for one pod. The node is the one given with `--node` or the first node of
the input on which the claims fit; without Node objects, the nodes are those
the ResourceSlices name. It prints the claims with `status.allocation` filled
in, so the output can be fed back in or applied. `--strategy first-fit` (the default) picks exactly the devices
kube-scheduler 1.37 picks; `--strategy best-fit` prefers devices that put
the least of their counter set out of other devices' reach. Exit 0: allocated; 1: the
claims do not fit (the explanation goes to stderr); 2: invalid input or a
fatal error (a CEL runtime error, an invalid pool when no node fits).

KEP-4815's four-request MIG claim gets four partitions of one GPU that share
no memory slice:

EOF
echo '```console'
run dractl allocate -f examples/a100-mig-mixins '|' grep -A20 '"^status:"'
echo '```'
cat <<'EOF'

Where would a pod's devices come from? The pod in
[pod.yaml](internal/cli/testdata/input/pod.yaml) asks for a MIG partition
through a ResourceClaimTemplate and shares a named claim; its nodeSelector
wants an H100 node. The claim made from the template is named and owned as
the resourceclaim controller would make it:

EOF
echo '```console'
run dractl allocate -f internal/cli/testdata/input/pod.yaml -f examples/dgx-h100-mixins '|' grep -A12 '"^  name: trainer-mig\|^      - device"'
echo '```'
cat <<'EOF'

The 4x4 TPU device spans four hosts, so the claim's node selector is the
device's own: every pod sharing the claim lands on one of those hosts.
Allocated together with a 2x4 claim it does not fit, because both consume the
same hosts' chip counters; `explain` shows, for each request, how many
candidate devices there were and why every other device was rejected:

EOF
echo '```console'
run dractl allocate -f examples/tpu-multihost/resourceslices.yaml -f examples/tpu-multihost/nodes.yaml -f examples/tpu-multihost/deviceclass.yaml -f internal/cli/testdata/allocate/tpu-4x4.yaml '|' grep -A17 '"^status:"'
echo
run dractl explain -f examples/tpu-multihost --node node-1
echo '```'
cat <<'EOF'

### describe

`describe pool NAME` (a pool name or `DRIVER/POOL`) and `describe node NAME`
(every pool an allocation on the node may use) show how full pools are.
Each shared counter set is drawn the way KEP-4815 draws a MIG GPU: one
column per memory slice (generally, per counter that partitions take
whole, such as a host's TPU chips; otherwise per unit of the most used
counter), one row per partition size. A partition shows the claim that
holds it, `X` when an overlapping allocation took counters it needs, or
its size when it is free. On a terminal claims are coloured; `-o svg`
writes the same picture as SVG. Here KEP-4815's four-partition MIG claim
is allocated and the result piped into describe:

EOF
echo '```console'
echo '$ dractl allocate -f examples/a100-mig-mixins | dractl describe pool a100-node -f examples/a100-mig-mixins/resourceslices.yaml -f - | head -n 24'
$B allocate -f examples/a100-mig-mixins 2>/dev/null | $B describe pool a100-node -f examples/a100-mig-mixins/resourceslices.yaml -f - | head -n 24
echo '```'
cat <<'EOF'

### On a live cluster: get pools, get claims, get devices, describe, explain pod/…, validate --live, snapshot

These verbs read a cluster with client-go and take kubectl's connection
flags (`--kubeconfig`, `--context`, `-n`, `--as`, `--request-timeout`, ...);
lists are paged (`--chunk-size`, default 100 objects per request), so they
work on clusters of thousands of nodes. Installed as `kubectl-dra` on
`$PATH`, dractl is a kubectl plugin:

    go build -o ~/bin/kubectl-dra ./cmd/dractl    # or: ln -s "$(command -v dractl)" ~/bin/kubectl-dra
    kubectl dra get pools

- `get pools [POOL...]` (`-o wide|json|yaml`): one row per pool: its
  node(s), slices published / `resourceSliceCount`, generation, devices
  in use / published, the most consumed shared counter (all of them with
  `-o wide`), and its state: `ok`, `incomplete` or `invalid` with the
  reason.
- `get claims [NAME...]` (`-n`, `-A`, `-l`, `-o wide|json|yaml`, `-w`):
  who has which device: each claim's state (`pending`, `allocated`,
  `reserved`, `prepared` once a pod it is reserved for runs, `deleting`),
  its devices per request with their pool, the node, the pods using it
  (those waiting for it marked) and its age. A namespace whose claims the
  user may not list is an error naming the 403, never an empty table.
- `get devices [POOL...]` (`-o wide|json|yaml`, `-w`): every device of
  every pool with the claim holding it, or, for a partition that cannot be
  made now, the claims holding its counters; its taints and its health
  (the driver's `dractl.dev/unhealthy` taint, the pods' reports).
  Both read files too (`-f`, a `snapshot` directory).
- `describe pool|node NAME` without `-f`: the pictures above, from the
  cluster (`-o svg` too); a node's slices are listed by field selector.
- `explain pod/NAME`: the pod's claims, named and from templates; for a
  pending pod, per node, why they do or do not fit, with the reasons of
  offline `explain`; for a scheduled pod, the devices it holds.
  kube-scheduler itself only says "cannot allocate all claims".
- `validate --live`: every DRA object of the cluster, pool checks included.
- `snapshot DIR`: the cluster's DRA objects, Nodes and pending Pods as
  files that every offline verb reads with `-f DIR` (`explain pod/NAME -f DIR`
  too).

A cluster that cannot be read is exit 2 with the request that failed:
`cannot list resourceslices.resource.k8s.io: ... cannot list resource
"resourceslices" ...` when RBAC forbids it, `... the API server at URL
cannot be reached: ...` when it is down (`--request-timeout` bounds every
request; without it dractl gives up after 60s).

The output below is real: the e2e tests (`make e2e`) publish the examples
through a real kube-apiserver, allocate `mig-1g-10gb` on the DGX node and
`gpu-partition-10gi` for a running pod, and create a pending pod `trainer`
whose template asks for eight 7g.80gb MIG devices. These are their golden
files ([e2e/testdata](e2e/testdata)):

EOF
echo '```console'
echo '$ dractl get pools'
cat e2e/testdata/get-pools.golden
echo
echo '$ dractl describe node dgx-h100-node | head -n 30'
head -n 30 e2e/testdata/describe-node-dgx.golden
echo '...'
echo
echo '$ dractl explain pod/trainer --node dgx-h100-node'
cat e2e/testdata/explain-pod-pending-one-node.golden
echo
echo '$ dractl explain pod/partition-user'
cat e2e/testdata/explain-pod-scheduled.golden
echo
echo '# dractl-gpu-driver on an A100 node, GPU 1 tainted unhealthy (e2e/getclaims_test.go)'
echo '$ dractl get claims -A'
cat e2e/testdata/get-claims.golden
echo '```'
cat <<'EOF'

Offline, on the files of a cluster whose `gpu-b` GPU its driver tainted
unhealthy ([internal/cli/testdata/get](internal/cli/testdata/get)):

EOF
echo '```console'
run dractl get devices -f internal/cli/testdata/get
echo '```'
cat <<'EOF'

`dractl describe node dgx-h100-node -o svg`:

![describe node -o svg](e2e/testdata/describe-node-dgx.svg)

### monitor

`dractl monitor` is a controller (client-go informers on ResourceSlices and
ResourceClaims). When a pool becomes invalid, or stays incomplete longer
than `--incomplete-grace` (5m), it records an events.k8s.io/v1 Event
(`PoolInvalid`, `PoolIncomplete`) on the offending ResourceSlices, with
their Node as the related object, and `PoolRecovered` when the pool is
whole again; devices that get a NoSchedule or NoExecute taint (a
driver's health taint, a DeviceTaintRule's in the slice) are a
`DeviceTainted` Event on their slice, `DeviceUntainted` when it goes. It
serves `/metrics` (`dractl_pools{condition}`,
`dractl_pool_condition`, `dractl_pool_devices`,
`dractl_pool_devices_allocated`, `dractl_pool_devices_tainted`, `dractl_pool_counter_capacity` and
`dractl_pool_counter_consumed` per counter set and counter,
`dractl_pool_validation_errors{reason}`; every metric of every component
is in [docs/metrics.md](docs/metrics.md)), `/healthz` and `/readyz` on
`--metrics-bind-address` (`:8080`). Replicas elect a leader through a
Lease (`--leader-elect`, on by default); only the leader records Events,
every replica serves metrics. With `--metrics-auth` (on in deploy/) they
are served over HTTPS and `/metrics` only to requests kube-apiserver
authenticates and authorizes (delegated authentication and authorization,
as kube-scheduler serves its own); bind a scraper to the
`dractl-monitor-metrics-reader` ClusterRole.

    dractl monitor --kubeconfig ~/.kube/config --leader-elect=false   # from a workstation
    docker build -f deploy/monitor/Dockerfile -t dractl:dev .         # the image the Deployment runs
    kubectl apply -f deploy/monitor/                                  # in a cluster
    kubectl events --for resourceslice/NAME                           # what it reported

[deploy/monitor](deploy/monitor) has the Namespace, the ServiceAccount,
least-privilege RBAC (list/watch ResourceSlices and ResourceClaims,
create/patch Events in `default`, its own Lease, the reviews of
`--metrics-auth`), a Deployment of two replicas with probes, and a
Service. The e2e tests apply it to the real apiserver and run the monitor
with that ServiceAccount's token. Every manifest under deploy/ is the Helm
chart [deploy/helm/dractl](deploy/helm/dractl) rendered with its default
values (`make manifests`); `helm install dractl deploy/helm/dractl`
installs the same with values for replicas, the scheduler profile and
metrics authentication.

### simulate

`simulate` answers a capacity planner's questions offline: with this
cluster (`-f`) and this stream of pods (`--workload`), how many pods are
placed on arrival, how many have to wait and for how long, when the first
one waits and why, how much capacity is used and how much is stranded
(free, but no device that can still be allocated consumes it), and does
the placement strategy matter. Pods are placed as kube-scheduler places
them (nodes in input order, the strategy picks the devices); a pod that
fits nowhere waits in a scheduling queue that behaves as kube-scheduler's
with its defaults: every departure moves the waiting pods, which are tried
by priority and then queueing time, those still backing off (1s, doubling
per failed attempt up to 10s) after the others, and a pod that no event
moved is retried after 5 minutes. Scheduling itself takes no simulated
time, and pods are not preempted. Pods with a lifetime leave and free
their devices; after the last arrival the run goes on until no pod waits
or none is left to leave, so that a pod still waiting at the end would
never be placed (its wait counts as "never"). A workload is a `Workload`
(kind of `simulate.dractl.dev/v1alpha1`: a seeded mix of pod kinds made
from ResourceClaimTemplates, with weights and priorities, mean time between
arrivals, mean lifetime) or Pods and ResourceClaims read from files;
[examples/dgx-h100-mixins/workload](examples/dgx-h100-mixins/workload/mig-inference.yaml)
is one. first-fit and best-fit run side by side. At about `--repacks`
moments of a run (default 10) an offline repack is measured: every running
pod placed anew, best-fit, in order of arrival on the cluster as it
started, then the waiting pods; "repack would let in" is the most waiting
pods it would have placed, what fragmentation cost at that moment. `-o
summary` is a line per strategy for CI logs; `-o json` gives every number,
the wait histogram, the repacks and the time series; `-o html` (or `--html
FILE`) a self-contained page with the wait histogram, charts over time
(waiting and running pods, utilisation and stranded capacity per counter,
the repack gap) and the occupancy picture of every node when the first pod
had to wait and at the end, drawn by the same renderer as `describe`. Used (stranded) shares are summed
over the cluster per counter family (`memory-slice` is all memory slices
of all GPUs).

EOF
echo '```console'
run dractl simulate -f examples/dgx-h100-mixins --workload examples/dgx-h100-mixins/workload
echo '```'
cat <<'EOF'

What the table says: the example's pods arrive about three times as fast
as the one node can hold them, so nine pods in ten wait, the queue grows
for as long as pods arrive, and the last ones wait over five hours with
either strategy. Every pod is placed in the end (pods leave after about
30 minutes). best-fit packs better while the node fills (29 pods before
the first one waits, against 26), and a repack would have let in at most
2 waiting pods with either strategy, but on a node this saturated the
overload, not the strategy, sets the waits: best-fit's median wait is 2
minutes shorter (33m23s against 35m45s) and its p95 and p99 are 8 and 7
minutes longer. Over four seeds of this stream best-fit's mean wait is
1.5 % shorter (shorter on three seeds, longer on one)
(`TestBestFitOnASaturatedNode` pins down what holds on every seed:
best-fit places more before the first wait, and the queue places every
pod). How many nodes keep the waits short, and where best-fit then
stands, is the next question (capacity planning, below the picture).

The HTML report of that run (`make report-screenshot` takes this picture
with headless Chromium):

![The simulate report: summary, charts of running pods, utilisation and stranded capacity, occupancy pictures](docs/simulate-report.png)

#### Capacity planning: how many nodes, which nodes could go

`--node-template FILE` asks how many nodes of one shape the workload needs:
the file (or directory) holds one node's ResourceSlices, its Node and the
DeviceClasses if the cluster lacks them. Copies of that node are added
after the cluster's own nodes (or make the cluster alone, without `-f`),
and the search finds the fewest copies with which the p99 wait stays
within `--max-wait` (default 5m), for each strategy: it doubles the count
until one is enough, then bisects; a pod never placed counts as waiting
forever. Every row of the runs table is one simulation of the whole
workload.

EOF
echo '```console'
run dractl simulate --node-template examples/dgx-h100-mixins --workload examples/dgx-h100-mixins/workload --max-wait 5m
echo '```'
cat <<'EOF'

Here best-fit's advantage shows: with four nodes the cluster keeps up, and
best-fit's p99 wait is less than half of first-fit's; both need four
nodes for a 5-minute bound, and with three the queue backs up for over an
hour either way. `TestNodesNeededIsMinimal` checks the answer from
scratch: with that many nodes the bound holds, with one fewer it breaks.

The reverse question, which nodes could go, is `--scale-down` on a
cluster snapshot (`dractl snapshot DIR`, then `-f DIR`): the claims
allocated there are the workload. Nodes holding the fewest claims are
tried first; a node can go if the claims on its own pools, those of one
pod together, can each be allocated anew on a node that stays (the first
in order on which they fit, with the claims moved before them), which is
how cluster-autoscaler's scale-down simulation drains a node, with DRA
claims re-allocated by the same allocator. Claims on pools other nodes
see too stay where they are.

EOF
echo '```console'
run dractl simulate -f internal/cli/testdata/simulate/snapshot --scale-down
echo '```'
cat <<'EOF'

How this relates to cluster-autoscaler, which simulates DRA for its
scale-up decisions too: both allocate the same claims the same way
(dractl's allocator gives upstream's answers,
[docs/upstream.md](docs/upstream.md)), and a template node here is what a
node group's template node is there, with its slices copied and renamed
per node. They differ in the question. cluster-autoscaler looks at the
pods pending now and adds nodes until each of them fits once, one node at
a time, with the in-tree scheduler framework; it knows nothing of the
pods to come or of when running ones leave. `simulate` replays a whole
workload over time, with departures and kube-scheduler's queue, and
answers with a count of nodes for a bound on how long pods wait (and, for
scale-down, replays no time at all: it asks whether what runs now fits on
fewer nodes, as cluster-autoscaler does for one node at a time). A
cluster that the autoscaler grows on demand needs fewer nodes at any
moment but makes pods wait for node start-up; the count here is the
standing capacity for which they do not wait.

### version

EOF
echo '```console'
run dractl version
echo '```'
cat <<'EOF'

`-o json` and `-o yaml` print the version, commit (empty when the build
recorded none), Go version and platform as an object. Release builds set the version with
`-ldflags "-X github.com/dractl/dractl/internal/cli.version=v1.2.3"`.

## Exit codes

| code | meaning |
| --- | --- |
| 0 | success: every input is valid (warnings, such as an incomplete pool, do not count) |
| 1 | an input is invalid: a decode, admission or pool error, an include that names no mixin, or with `flatten --strict` a flattened slice beyond a v1 limit. Everything that could be checked was checked and printed. Also: the output could not be written |
| 2 | usage error (unknown verb or flag, bad flag value, no `-f`) or an input that cannot be read (missing file, permission denied); nothing was checked |

`allocate` and `explain` differ: for them 1 means the claims do not fit
(allocate only, `ExitNoFit`), and invalid input or a fatal allocator error
(an invalid pool) is 2 (`ExitCannotAnswer`). `explain -o json` prints an
`ExplainReport` ([docs/output.md](docs/output.md)).

## Examples

[examples/](examples/) has one self-contained directory per feature (slices,
the Nodes they name, DeviceClasses and claims); see
[examples/README.md](examples/README.md).

| directory | shows |
| --- | --- |
| [gpu-partitions](examples/gpu-partitions/) | KEP-4815's 40Gi GPU with four 10Gi partitions: a counter set in its own slice |
| [a100-mig-flat](examples/a100-mig-flat/) | A100 40GB MIG, every profile and placement, plain v1 |
| [a100-mig-mixins](examples/a100-mig-mixins/) | the same pool written with KEP-5234 mixins |
| [dgx-h100-mixins](examples/dgx-h100-mixins/) | an 8-GPU DGX H100 node with mixins, split over 5 slices |
| [tpu-multihost](examples/tpu-multihost/) | a 4x4 TPU block over four hosts with per-device node selection |

The two A100 directories describe the same pool of the same node: validated
together they publish every slice twice, which validate reports as duplicate
devices and counter sets.

## Write a driver

`pkg/driverkit` is the node side of a DRA driver (and, for pools no node
owns, its control-plane side) on top of
`k8s.io/dynamic-resource-allocation`'s `kubeletplugin` (registration, the
DRA gRPC services, claim lookup) and `resourceslice` (publishing,
generations). A driver describes its pool with dractl's API — mixins
allowed — and supplies a `Profile`, the hardware-specific part:

```go
type Profile interface {
	CreatePartition(ctx context.Context, claim types.UID, dev driverkit.AllocatedDevice) (driverkit.Partition, error)
	DestroyPartition(ctx context.Context, p driverkit.Partition) error
	Partitions(ctx context.Context) ([]driverkit.Partition, error)
	ContainerEdits(claim types.UID, dev driverkit.AllocatedDevice, p driverkit.Partition) cdispec.ContainerEdits
}

d, err := driverkit.Start(ctx, driverkit.Options{
	Config:   driverkit.Config{DriverName: "gpu.example.com", Profile: gpus, StateDir: "/var/lib/my-driver", CDIDir: "/var/run/cdi"},
	NodeName: node, KubeClient: client,
}, gpus.Pool()) // []*api.ResourceSlice, with or without mixins
```

The kit then:

- **publishes** the pool flattened (no released kube-apiserver accepts
  `spec.mixins`; `ServerAcceptsMixins` reads the server's OpenAPI v3 schema
  to tell), counter sets in slices of their own, devices split at the v1
  per-slice limits, every slice through admission and the pool through pool
  validation first — an invalid pool is refused whole, with field paths, and
  a Warning event `InvalidResourcePool` on the Node;
- **prepares** each claim in two phases with one checkpoint file per claim
  (atomic write, fsync, SHA-256): `PrepareStarted` → partitions created →
  CDI spec written → `PrepareCompleted`. A repeated prepare returns the
  recorded answer; a device, or a partition whose counters overlap one
  already prepared for another claim, is refused naming the holder;
  unprepare is idempotent; claims of different pods are prepared in
  parallel;
- **reconciles** at start, before registering with the kubelet: interrupted
  prepares are rolled back, interrupted unprepares finished, partitions and
  CDI specs that no completed claim owns removed, corrupt checkpoints moved
  aside (`*.corrupt`) without leaking their partitions;
- writes a **transient CDI spec per claim** with
  `tags.cncf.io/container-device-interface` and serves **device health**
  when the profile implements `HealthProfile`, to the kubelet (the pod's
  status shows it, KEP-4680) and as **taints** of its own devices: an
  unhealthy device, and every partition of an unhealthy GPU, is
  republished `dractl.dev/unhealthy=<reason>:NoSchedule` (`NoExecute`
  when the operator asks, which evicts its pods), so that no scheduler
  places new claims there, until it is healthy again; events a
  `NoticeProfile` does not hold against the device (an application's XID)
  become `dractl.dev/health-event=<what>:None` (`pkg/driverkit/taints.go`);
- records **metrics** of its prepares and unprepares (duration, errors by
  reason, requests in flight), prepared claims and partitions, slice
  writes and health events ([docs/metrics.md](docs/metrics.md));
- hands the profile each device's **opaque configuration** when it
  implements `ConfigProfile` (below), and writes per-request edits when it
  implements `RequestEditsProfile` — what a container gets together, such
  as one `NVIDIA_VISIBLE_DEVICES` naming all its MIG devices, which
  per-device edits would overwrite.

### Device configuration

DeviceClass `spec.config` and claim `spec.devices.config` reach the
profile. For each allocated device the kit takes the configurations of the
claim's `status.allocation.devices.config` for its driver that apply to
its request (no `requests` means all; a subrequest `gpu/small` is matched
by `gpu` too), the class's before the claim's so that the claim's win, and
decodes each once with the profile's `DecodeConfig`. A configuration the
profile cannot decode fails the prepare before anything is created, naming
claim, request and index:

```go
type ConfigProfile interface {
	driverkit.Profile
	DecodeConfig(parameters runtime.RawExtension) (any, error)
}
// in CreatePartition and ContainerEdits:
for _, c := range dev.Configs { // class first, then claim
	cfg := c.Decoded.(*gpuconfig.GpuConfig)
	...
}
```

`dractl-gpu-driver` takes a `GpuConfig` (`pkg/gpuconfig`):
`computeInstanceProfile` creates a smaller compute instance in a MIG
device's GPU instance (NVML backend), `timeSlicing.interval` reaches the
container as `DRACTL_GPU_<DEVICE>_TIMESLICE_INTERVAL`:

```yaml
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: two-3g-shared
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: mig.dractl.dev
          count: 2
          selectors:
          - cel:
              expression: device.attributes['gpu.dractl.dev'].profile.startsWith('3g.')
      config:
      - requests: [gpu]
        opaque:
          driver: gpu.dractl.dev
          parameters:
            apiVersion: gpu.dractl.dev/v1alpha1
            kind: GpuConfig
            computeInstanceProfile: 1c        # or 1c.3g.20gb
            timeSlicing:
              interval: Short                 # Default, Short, Medium, Long
```

`dractl-gpu-driver` (`cmd/dractl-gpu-driver`, profile in `pkg/mockgpu`) is a
mock partitionable GPU driver built on it: A100 40GB or H100 80GB GPUs with
the MIG tables of `pkg/mig` (the ones the examples use), one counter set per
GPU and every placement as a device; at prepare it creates the MIG device
as a file in its state directory (and refuses one that overlaps, as
`nvidia-smi mig -cgi` would), and the container gets
`DRACTL_GPU_<DEVICE>_{GPU_UUID,GPU_INDEX,PROFILE,UUID,CLAIM}`, the GPU's
device node and the MIG device's file. Deploy it with
[deploy/driver/](deploy/driver/):

    kubectl apply -f deploy/driver/rbac.yaml -f deploy/driver/deviceclasses.yaml -f deploy/driver/daemonset.yaml
    kubectl label node NODE dractl.dev/mock-gpus=true

A file `unhealthy/<gpu index or device name>` in its GPUs' state
directory (`<state-dir>/gpus`) makes that GPU (with its partitions) or
device unhealthy, its content being the reason; removing it makes it
healthy again. `--health-interval` (10s) is how often health is read,
`--unhealthy-taint-effect=NoExecute` opts into eviction,
`--health-taints=false` keeps the slices untouched. `--metrics-bind-address`
serves `/metrics`, with `--metrics-auth` behind delegated authentication
and authorization as the monitor's.

Its tests talk to it as the kubelet does (registration `GetInfo`, then
`NodePrepareResources`/`NodeUnprepareResources` v1 over the unix sockets)
and kill it with SIGKILL at every step of prepare and unprepare
(`DRACTL_GPU_DRIVER_FAILPOINT`), restart it and check that exactly one
partition per prepared claim exists and the answer is unchanged:

    go test ./pkg/driverkit/... ./pkg/mockgpu/...

In `e2e/` the built binary runs against the real node side: the kubelet's
own DRA manager and plugin manager (`k8s.io/kubernetes/pkg/kubelet/cm/dra`,
`pkg/kubelet/pluginmanager`) in the test process, beside kube-apiserver,
the resourceclaim controller and dractl-scheduler. The driver registers
through the registration directory, publishes as the ServiceAccount of
`deploy/driver/`, a pod with a MIG claim template is scheduled, the
kubelet's manager has it prepared over the unix socket (the MIG device and
the CDI spec exist, the container's CDI devices inject its environment and
device nodes), and deleting the pod unprepares it. The driver is also
killed at every step of prepare and unprepare while the kubelet calls it;
the kubelet's retries converge once it is back:

    go -C e2e test -run 'TestKubeletPreparesMIGClaim|TestDriverCrashConverges' .

### Pools no node owns

Network-attached devices, a multi-host TPU block whose devices choose
their hosts (`perDeviceNodeSelection`) or devices every node reaches
(`allNodes`) are published from the control plane (KEP-4815), not by a
kubelet plugin — which the kit refuses them from, as it refuses another
node's `nodeName`. `driverkit.StartController` validates and flattens
them as the node side does and publishes them while its replica holds a
Lease; slices of nodes are never touched:

```go
c, err := driverkit.StartController(ctx, driverkit.ControllerOptions{
	DriverName: "tpu.google.com", KubeClient: client,
	LeaderElection: driverkit.LeaderElection{Namespace: "tpu-system"},
}, pools) // []*api.ResourceSlice: nodeSelector, allNodes or perDeviceNodeSelection
```

`dractl-pool-publisher` (`cmd/dractl-pool-publisher`) runs it on files of
ResourceSlices, as a Deployment of two replicas
([deploy/driver/controlplane.yaml](deploy/driver/controlplane.yaml), RBAC in
`controlplane-rbac.yaml`):

    kubectl apply -f deploy/driver/controlplane-rbac.yaml -f deploy/driver/controlplane.yaml

In `e2e/`, two replicas publish `examples/tpu-multihost`, the two pods of
a Deployment sharing one claim of a 2x4 are scheduled on the two hosts of
the allocated device, and when the leader stops the other replica takes
over:

    go -C e2e test -run TestTPUBlockFromTheControlPlane .

### NVML backend

`dractl-gpu-driver --backend=nvml` (profile in `pkg/nvmlgpu`) drives real
NVIDIA GPUs through NVML (`github.com/NVIDIA/go-nvml`, so the binary needs
cgo). Nothing comes from a table: it discovers each GPU's UUID, product,
memory and MIG mode and, with MIG on, every GPU instance profile NVML
reports with its placements, and publishes them as `pkg/mig` publishes its
tables — one counter set per GPU, every placement a device. A GPU with MIG
off is one whole device (the log says why). Prepare creates the GPU
instance at the allocated placement (`CreateGpuInstanceWithPlacement`) and
one compute instance over it (or of the configured
`computeInstanceProfile`); the container gets
`NVIDIA_VISIBLE_DEVICES=<MIG UUID>,...` naming every MIG device of the
request for NVIDIA's runtime hook, the
`/dev/nvidia*` nodes and the GPU and compute instance's
`/dev/nvidia-caps` nodes (minors from
`/proc/driver/nvidia-caps/mig-minors`). Unprepare destroys the compute
instance, then the GPU instance. The driver records what it creates in a
versioned file in its state directory, so reconciliation at start destroys
its own orphans and never an instance someone else made. XID critical
errors mark a GPU's devices unhealthy and tainted; application XIDs leave
them healthy with an informational taint for 10 minutes. Deploy it
with `deploy/driver/daemonset-nvml.yaml` (host `/dev`, NVIDIA's runtime
class as an option):

    kubectl apply -f deploy/driver/rbac.yaml -f deploy/driver/deviceclasses.yaml -f deploy/driver/daemonset-nvml.yaml
    kubectl label node NODE dractl.dev/nvml-gpus=true

Its tests run on NVIDIA's own mock DGX A100, H100, H200 and B200 servers
(`pkg/nvml/mock/dgx*`), which `pkg/nvmlgpu/nvmlmock` makes refuse
overlapping GPU instances as the hardware does; the test-only flag
`--nvml-mock=dgxa100` runs the driver on one, whose instances are kept
in the state directory so that they outlive the driver as a GPU's do.
Crash tests kill that driver at every step of prepare and unprepare, and
between its NVML calls, and count the GPU instances left. In `e2e/` the binary runs on
each of the four under the kubelet's DRA manager, with a claim of two MIG
devices and a `GpuConfig`:

    go test ./pkg/nvmlgpu/...
    go -C e2e test -run TestNVMLDriverOnMockDGX .

## In kube-scheduler: dractl-scheduler

`dractl-scheduler` is kube-scheduler v1.37 with dractl's DRA plugin
(`DractlDynamicResources`, package `pkg/schedplugin`) registered; every
other plugin (node resources, affinity, taints, preemption) is stock. It is
its own Go module, [scheduler/](scheduler/), so that the main module never
depends on `k8s.io/kubernetes`. Build it and run it against a cluster with
any kubeconfig that may act as the scheduler:

    make scheduler      # builds bin/dractl-scheduler (k8s.io/kubernetes: a long first build)
    # With --config, kube-scheduler takes the kubeconfig from the file only.
    { cat deploy/scheduler/config-two-profiles.yaml
      printf 'clientConnection:\n  kubeconfig: %s\n' "$HOME/.kube/config"; } > /tmp/dractl-scheduler.yaml
    bin/dractl-scheduler --config /tmp/dractl-scheduler.yaml --leader-elect=false

[deploy/scheduler/](deploy/scheduler/) holds two configurations:
`config.yaml` replaces DynamicResources in the default profile (run it in
place of kube-scheduler), `config-two-profiles.yaml` keeps the stock
profile and adds `schedulerName: dractl`, which pods opt into. Both plugins
then share the scheduler's claim tracker and never hand out a device twice;
run one scheduler process for DRA pods, since two processes cannot see each
other's allocations in flight. `kubectl apply -k deploy/scheduler` installs
RBAC, the configuration and a Deployment of two replicas electing a leader (image built with
`scheduler/Dockerfile`). With kube-scheduler's alpha
`--feature-gates=SchedulerPreQueueingHints=true`, dractl's plugin narrows
each claim event to the pods that reference the claim (or to all pods when
the event freed devices), as the in-tree plugin does. Its cycles take
microseconds, so it holds the next one back while 64 of its pods are
between Reserve and the end of PreBind's writes (`bindingsInFlight`):
the API server stays as busy, and pods are bound about in the order they
were scheduled instead of all near the end. Its own work is on
kube-scheduler's `/metrics`: allocation attempts and their outcomes per
kind of claim, the State's applied and refused events, remembered node
answers, assumptions held and expired (`dractl_scheduler_*`,
[docs/metrics.md](docs/metrics.md)). When no node fits, the pod's
`PodScheduled` condition and `FailedScheduling` event read exactly as under
the in-tree plugin, so that alerts and dashboards that match its words keep
working; dractl's account of what stopped the nodes, per claim, comes
beside them as a `DevicesUnavailable` event on the pod (`kubectl describe
pod` shows both). From the e2e test of a pod asking for an A100 MIG device
in a cluster of one DGX H100 node and two nodes without devices, where the
same pod under the stock profile gets the same condition:

    PodScheduled: 0/3 nodes are available: 3 cannot allocate all claims.
    preemption: 0/3 nodes are available: 3 Preemption is not helpful for
    scheduling.
    Warning DevicesUnavailable: claim gpu: no devices on 2 nodes; selector
    matched 0 devices on 1 node

With the plugin argument `explanation: Inline` the account replaces the
in-tree words in the condition instead, per node and summed up.

Which DRA features of kube-scheduler 1.37 the plugin serves, gate by gate
and with the test that shows each, is in
[docs/scheduler-features.md](docs/scheduler-features.md); `make
schedperf` runs kube-scheduler's own scheduler_perf DRA test cases with
the in-tree plugin and with dractl's in its place: all 18 pass with both,
and CI runs them (results in [docs/upstream.md](docs/upstream.md)).

## Conformance and performance

    make conformance   # N=2000 seeded scenarios side by side with upstream; last line "N passed, M failed"
    make bench         # upstream vs dractl benchmarks; rewrites docs/performance.md
    make bench-e2e     # the race: stock DynamicResources vs dractl in one dractl-scheduler; rewrites its table
    make bench-schedperf # scheduler_perf's DRA performance workloads: in-tree, dractl and the claim-less floor

`conformance/` is a separate Go module (so the main module never depends on
`k8s.io/dynamic-resource-allocation`). It generates scenarios (pools split
over slices with counter sets in their own slices, MIG-like GPUs, per-device
and multi-host node selection, taints, incomplete and invalid pools,
consumable capacity, firstAvailable, All, adminAccess, matchAttribute and
distinctAttribute, already-allocated claims, mixins given to upstream
flattened) and runs each on every node through upstream's allocator (the
variant kube-scheduler 1.37 uses with every DRA feature on) and through
dractl's first-fit. Outcomes (fits, does not fit, fatal) and chosen devices
must be identical, and an independent verifier checks every result.
Disagreements are shrunk and written to `pkg/allocator/testdata/regressions/`;
the fixed ones are replayed by `pkg/allocator`'s regression test. CI runs
`make conformance`. The latest benchmark table, with the machine it ran on,
is [docs/performance.md](docs/performance.md).

The race (about 35 minutes) starts a real control plane per workload, with
kube-apiserver, etcd and dractl-scheduler as its own process: plain and MIG
clusters of 100 and 500 nodes, one 90 % full, claims from templates, a
4-request matchAttribute mix, and a row without claims that shows what
kube-scheduler itself costs. Each row runs three times with the two
profiles taking turns; the table gives pods/s, when the first, half and
99 % of the pods were bound, the scheduler's CPU per pod and a check of
every allocation afterwards. Lines under it compare the MIG rows with
what kube-scheduler costs without claims, and dractl's MIG pods/s with
stock's plain pods/s on as many nodes. docs/performance.md also explains
where the CPU goes and what was tried.

## Architecture

[docs/architecture.md](docs/architecture.md) maps the packages. In short:
`pkg/decode` reads manifests, `pkg/validation` holds admission rules and
limits, `pkg/pool` assembles and checks pools, `pkg/api` defines the mixin
semantics (`Flatten`, lazy views) and the v1 conversion, `pkg/compact`
rewrites into mixin form, `pkg/allocator` allocates like the scheduler.
`internal/cli` has one file per verb; `cmd/dractl` only calls
`cli.Execute()`.

The CLI's golden tests (`internal/cli/testdata/*.golden`) run each verb
in-process on the examples and on the bad inputs and record stdout, stderr
and the exit code; `go test ./internal/cli -update` rewrites them.
EOF
rm -f /tmp/compacted.yaml
