// Package vsphere is stratus's native cloud provider for VMware vSphere.
package vsphere
