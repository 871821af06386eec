package scheduling

// DeviceTypeMIG is the DeviceAttributeType value of a MIG slice (see
// nvidiadra.go): with MIG enabled on a GPU, NVIDIA's GPU DRA driver
// publishes each of its MIG slices as a device of its own, beside the
// node's whole GPUs that run without MIG.
const DeviceTypeMIG = "mig"
