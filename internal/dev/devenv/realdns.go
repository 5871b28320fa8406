package devenv

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The real nodes' cluster DNS is CoreDNS (hack/kubebins/coredns, built at
// a pinned version) as a cluster's DNS add-on is deployed: a Deployment in
// kube-system behind the kube-dns Service at a fixed ClusterIP, which every
// kubelet names as clusterDNS. Its kubernetes plugin answers for the
// cluster's Services and pods from the API server; it forwards nothing (no
// name lookup leaves this machine), so other names get no answer.
const (
	// CoreDNSImage is CoreDNS's image, under the name kubeadm gives it.
	CoreDNSImage = "registry.k8s.io/coredns/coredns:" + coreDNSVersion
	// coreDNSVersion is hack/kubebins/versions.env's COREDNS_VERSION.
	coreDNSVersion = "v1.15.0"
	// ClusterDNS is the kube-dns Service's ClusterIP: the tenth address of
	// ServiceCIDR, as kubeadm chooses it.
	ClusterDNS = "10.96.0.10"
	// ClusterDomain is the cluster's DNS domain, the e2e suite's default.
	ClusterDomain = "cluster.local"
)

// coreDNSName names the Deployment, its ConfigMap, service account and
// cluster role (the names kubeadm uses).
const coreDNSName = "coredns"

// corefile serves the cluster domain and reverse zones from the API server
// (pods' A records from their IPs, as kube-dns did), with the readiness
// endpoint the Deployment's probe asks.
const corefile = `.:53 {
    errors
    health :8080
    ready :8181
    kubernetes ` + ClusterDomain + ` in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    cache 30
    loadbalance
}
`

// deployClusterDNS creates or updates CoreDNS's RBAC, ConfigMap,
// Deployment and the kube-dns Service.
func deployClusterDNS(ctx context.Context, cs kubernetes.Interface) error {
	labels := map[string]string{"k8s-app": "kube-dns"}
	ns := metav1.NamespaceSystem
	meta := metav1.ObjectMeta{Name: coreDNSName, Namespace: ns, Labels: labels}
	clusterMeta := metav1.ObjectMeta{Name: "system:" + coreDNSName, Labels: labels}
	sa := &corev1.ServiceAccount{ObjectMeta: meta}
	role := &rbacv1.ClusterRole{
		ObjectMeta: clusterMeta,
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: clusterMeta,
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
	}
	cm := &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"Corefile": corefile}}
	probe := func(path string, port int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}},
			PeriodSeconds: 5, TimeoutSeconds: 5, FailureThreshold: 5,
		}
	}
	dep := &appsv1.Deployment{
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: sa.Name,
					PriorityClassName:  "system-cluster-critical",
					// CoreDNS does not resolve through itself.
					DNSPolicy: corev1.DNSDefault,
					Containers: []corev1.Container{{
						Name:            coreDNSName,
						Image:           CoreDNSImage,
						ImagePullPolicy: corev1.PullNever,
						Args:            []string{"-conf", "/etc/coredns/Corefile"},
						Ports: []corev1.ContainerPort{
							{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
							{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
						},
						VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
						LivenessProbe:  probe("/health", 8080),
						ReadinessProbe: probe("/ready", 8181),
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
						},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}},
					}}},
				},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector:  labels,
			ClusterIP: ClusterDNS,
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			},
		},
	}
	steps := []struct {
		what   string
		create func() error
		update func() error
	}{
		{"service account", func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
			return err
		}, nil},
		{"cluster role", func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
			return err
		},
			func() error {
				_, err := cs.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
				return err
			}},
		{"cluster role binding", func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
			return err
		}, nil},
		{"config map", func() error { _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); return err },
			func() error { _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); return err }},
		{"deployment", func() error {
			_, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
			return err
		},
			func() error {
				_, err := cs.AppsV1().Deployments(ns).Update(ctx, dep, metav1.UpdateOptions{})
				return err
			}},
		{"service", func() error { _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); return err }, nil},
	}
	for _, s := range steps {
		err := s.create()
		if apierrors.IsAlreadyExists(err) && s.update != nil {
			err = s.update()
		} else if apierrors.IsAlreadyExists(err) {
			err = nil
		}
		if err != nil {
			return fmt.Errorf("cluster DNS: %s %s/%s: %w", s.what, ns, coreDNSName, err)
		}
	}
	return nil
}
