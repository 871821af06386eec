package coscheduling

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Builders of the nodes and pods the tests schedule.

// gpuNode is a node with 8 GPUs, 64 CPUs, 512Gi and room for 110 pods.
func gpuNode(name string) *v1.Node {
	return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{
		v1.ResourceCPU: "64", v1.ResourceMemory: "512Gi", v1.ResourcePods: "110", gpu: "8",
	}).Obj()
}

func gpuNodes(n int) []*v1.Node {
	nodes := make([]*v1.Node, n)
	for i := range nodes {
		nodes[i] = gpuNode(nodeName(i))
	}
	return nodes
}

func nodeName(i int) string { return "node-" + string(rune('a'+i/26)) + string(rune('a'+i%26)) }

// batchPod is a pod outside gangs that finishes on its own (a Job's pod),
// bound to node and asking for gpus GPUs.
func batchPod(name, node, gpus string) *v1.Pod {
	p := st.MakePod().Namespace("other").Name(name).UID("other/" + name).Node(node).
		Req(map[v1.ResourceName]string{gpu: gpus}).Obj()
	p.Spec.RestartPolicy = v1.RestartPolicyNever
	return p
}

// servicePod is a pod outside gangs that never finishes on its own (a
// Deployment's or a DaemonSet's pod), bound to node and asking for gpus GPUs.
func servicePod(name, node, gpus string) *v1.Pod {
	p := batchPod(name, node, gpus)
	p.Spec.RestartPolicy = v1.RestartPolicyAlways
	return p
}

// member is a gang member asking for gpus GPUs and one CPU.
func member(group, name string, gpus string) *v1.Pod {
	req := map[v1.ResourceName]string{v1.ResourceCPU: "1"}
	if gpus != "" && gpus != "0" {
		req[gpu] = gpus
	}
	return st.MakePod().Namespace(testNS).Name(name).UID(testNS+"/"+name).
		SchedulerName(testScheduler).Label(scheduling.PodGroupLabel, group).Req(req).Obj()
}

func members(group string, n int, gpus string) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = member(group, fmt.Sprintf("%s-%d", group, i), gpus)
	}
	return pods
}
