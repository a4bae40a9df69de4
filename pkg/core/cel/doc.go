// Package cel compiles and evaluates DRA device selectors the way
// Kubernetes 1.37 does (k8s.io/dynamic-resource-allocation/cel), with one
// difference that is the point of KEP-5234: a device is not converted into
// maps before evaluation. The `device` variable is backed by an
// api.DeviceView, and each attribute or capacity is read through the
// device's mixins only when the expression asks for it.
//
// The environment is the one 1.37 uses for stored expressions, which is
// also what new expressions get with DRAConsumableCapacity and
// DRAListTypeAttributes enabled: the Kubernetes base libraries (quantity,
// semver, lists, strings, sets, regex, URLs, IP/CIDR, format), cel.bind,
// and
//
//	device.driver                    string
//	device.allowMultipleAllocations  bool
//	device.attributes[domain][id]    int, bool, string, semver, or a list of one of those
//	device.capacity[domain][id]      quantity
//
// An id without a domain on the device is in the driver's domain.
// Selectors whose estimated worst-case cost exceeds MaxCost are rejected
// by Compile; evaluation stops at the same limit.
package cel
