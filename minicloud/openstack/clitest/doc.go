// Package clitest runs Debian's openstack command (python3-openstackclient
// with python3-octaviaclient) against minicloud's OpenStack dialect: the
// everyday workflows of an operator, from server list to a load balancer
// built one object at a time that carries traffic. It has only tests.
package clitest
