// Package dra owns the ResourceClaims gpu-gang allocates itself: the claims
// several members of one gang share, and a PodGroup's claims, which
// kube-scheduler's DynamicResources plugin cannot allocate for a gang whose
// members wait for each other in Permit.
//
// Every allocation gpu-gang writes carries a Mark (the gang and a token of
// the write), so that its ownership outlives the process that wrote it.
package dra
