package minicloudcmd

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

// group returns a command group with the client flags.
func group(use, short string, aliases ...string) (*cobra.Command, *clientFlags) {
	cmd := &cobra.Command{Use: use, Short: short, Aliases: aliases}
	return cmd, addClientFlags(cmd)
}

// action builds a RunE that connects and calls fn.
func action(f *clientFlags, fn func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := f.client()
		if err != nil {
			return err
		}
		return fn(cmd.Context(), cmd, c, args)
	}
}

// eachID runs fn for every ID argument and prints what it did.
func eachID(f *clientFlags, verb string, fn func(ctx context.Context, c *client.Client, id string) error) func(*cobra.Command, []string) error {
	return action(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, ids []string) error {
		for _, id := range ids {
			if err := fn(ctx, c, id); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", id, verb)
		}
		return nil
	})
}

// listFlags are the filters of list commands.
type listFlags struct {
	name string
	tags []string
}

func (l *listFlags) add(cmd *cobra.Command, named bool) {
	if named {
		cmd.Flags().StringVar(&l.name, "name", "", "only the resource with this name")
	}
	cmd.Flags().StringSliceVar(&l.tags, "tag", nil, "only resources with tag KEY=VALUE or KEY (repeatable)")
}

func (l *listFlags) options() (client.ListOptions, error) {
	tags, err := parseTags(l.tags, true)
	return client.ListOptions{Name: l.name, Tags: tags}, err
}

// ---- instances

func instanceRows(items []api.Instance) [][]string {
	rows := make([][]string, len(items))
	for i, in := range items {
		rows[i] = []string{in.ID, in.Name, in.State, in.Type, in.Zone, in.PrivateIP, orDash(in.PublicIP), formatTags(in.Tags), age(in.CreatedAt)}
	}
	return rows
}

var instanceHeader = []string{"ID", "NAME", "STATE", "TYPE", "ZONE", "PRIVATE IP", "PUBLIC IP", "TAGS", "AGE"}

func newInstancesCommand() *cobra.Command {
	cmd, f := group("instances", "Create, list, stop, start and delete instances", "instance", "i")

	var lf listFlags
	list := &cobra.Command{Use: "list", Short: "List instances", Args: cobra.NoArgs,
		RunE: action(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, _ []string) error {
			o, err := lf.options()
			if err != nil {
				return err
			}
			items, err := c.ListInstances(ctx, o)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), items, instanceHeader, instanceRows(items))
		})}
	lf.add(list, true)

	var in api.InstanceCreate
	var tags, labels []string
	var key string
	create := &cobra.Command{Use: "create NAME", Short: "Create an instance", Args: cobra.ExactArgs(1),
		RunE: action(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			in.Name = args[0]
			var err error
			if in.Tags, err = parseTags(tags, false); err != nil {
				return err
			}
			if in.Labels, err = parseTags(labels, false); err != nil {
				return fmt.Errorf("--label: %w", err)
			}
			var opts []client.CallOption
			if key != "" {
				opts = append(opts, client.WithIdempotencyKey(key))
			}
			inst, err := c.CreateInstance(ctx, in, opts...)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), inst, instanceHeader, instanceRows([]api.Instance{*inst}))
		})}
	create.Flags().StringVar(&in.Type, "type", "mc.small", "instance type (mc.small, mc.medium, mc.large)")
	create.Flags().StringVar(&in.Zone, "zone", "mc-central-a", "zone (mc-central-a, -b, -c)")
	create.Flags().BoolVar(&in.PublicIP, "public-ip", false, "allocate a public IP")
	create.Flags().BoolVar(&in.IPv6, "ipv6", false, "allocate a private IPv6 address too (dual-stack)")
	create.Flags().StringSliceVar(&tags, "tag", nil, "tag KEY=VALUE (repeatable)")
	create.Flags().StringSliceVar(&labels, "label", nil, "label KEY=VALUE, reported to Kubernetes as a node label (repeatable)")
	create.Flags().StringVar(&key, "idempotency-key", "", "Idempotency-Key: a retry with the same key creates nothing new")

	get := &cobra.Command{Use: "get ID", Short: "Show an instance", Args: cobra.ExactArgs(1),
		RunE: action(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			inst, err := c.GetInstance(ctx, args[0])
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), inst, instanceHeader, instanceRows([]api.Instance{*inst}))
		})}

	stop := &cobra.Command{Use: "stop ID...", Short: "Stop instances", Args: cobra.MinimumNArgs(1),
		RunE: eachID(f, "stopped", func(ctx context.Context, c *client.Client, id string) error {
			_, err := c.StopInstance(ctx, id)
			return err
		})}
	start := &cobra.Command{Use: "start ID...", Short: "Start instances", Args: cobra.MinimumNArgs(1),
		RunE: eachID(f, "started", func(ctx context.Context, c *client.Client, id string) error {
			_, err := c.StartInstance(ctx, id)
			return err
		})}
	del := &cobra.Command{Use: "delete ID...", Short: "Delete instances", Args: cobra.MinimumNArgs(1),
		RunE: eachID(f, "deleted", func(ctx context.Context, c *client.Client, id string) error { return c.DeleteInstance(ctx, id) })}
	cmd.AddCommand(list, create, get, stop, start, del)
	return cmd
}

// ---- load balancers

var lbHeader = []string{"ID", "NAME", "STATE", "VIP", "LISTENERS", "TARGETS", "TAGS", "AGE"}

func lbRows(items []api.LoadBalancer) [][]string {
	rows := make([][]string, len(items))
	for i, lb := range items {
		var ls, ts []string
		for _, l := range lb.Listeners {
			ls = append(ls, fmt.Sprintf("%s:%d->%d", l.Protocol, l.Port, l.TargetPort))
		}
		for _, th := range lb.TargetHealth {
			name := th.Target.InstanceID
			if name == "" {
				name = th.Target.IP
			}
			ts = append(ts, name+"("+th.State+")")
		}
		rows[i] = []string{lb.ID, lb.Name, lb.State, lb.VIP, orDash(strings.Join(ls, ",")), orDash(strings.Join(ts, ",")), formatTags(lb.Tags), age(lb.CreatedAt)}
	}
	return rows
}

// lbSpecFlags are the flags that describe a load balancer.
type lbSpecFlags struct {
	listeners    []string
	targets      []string
	healthCheck  string
	interval     int
	sourceRanges []string
	tags         []string
}

func (l *lbSpecFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringSliceVar(&l.listeners, "listener", nil, "PROTOCOL:PORT[:TARGET_PORT], e.g. TCP:80:30080 (repeatable, at least one)")
	fs.StringSliceVar(&l.targets, "target", nil, "instance ID or IP address (repeatable)")
	fs.StringVar(&l.healthCheck, "health-check", "", "PROTOCOL[:PORT[:PATH]], e.g. HTTP:10256:/healthz (default: TCP to the first TCP listener's target port)")
	fs.IntVar(&l.interval, "health-interval", 0, "health check interval in seconds (default 5)")
	fs.StringSliceVar(&l.sourceRanges, "source-range", nil, "allowed client CIDR (repeatable; default all)")
	fs.StringSliceVar(&l.tags, "tag", nil, "tag KEY=VALUE (repeatable)")
}

func (l *lbSpecFlags) spec() (api.LoadBalancerSpec, error) {
	var spec api.LoadBalancerSpec
	for _, s := range l.listeners {
		ln, err := parseListener(s)
		if err != nil {
			return spec, err
		}
		spec.Listeners = append(spec.Listeners, ln)
	}
	for _, s := range l.targets {
		t, err := parseTarget(s)
		if err != nil {
			return spec, err
		}
		spec.Targets = append(spec.Targets, t)
	}
	var err error
	if spec.HealthCheck, err = parseHealthCheck(l.healthCheck, l.interval); err != nil {
		return spec, err
	}
	spec.SourceRanges = l.sourceRanges
	spec.Tags, err = parseTags(l.tags, false)
	return spec, err
}

func newLBsCommand() *cobra.Command {
	cmd, f := group("lbs", "Create, list, update and delete load balancers", "lb", "load-balancers")

	var lf listFlags
	list := &cobra.Command{Use: "list", Short: "List load balancers with target health", Args: cobra.NoArgs,
		RunE: action(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, _ []string) error {
			o, err := lf.options()
			if err != nil {
				return err
			}
			items, err := c.ListLoadBalancers(ctx, o)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), items, lbHeader, lbRows(items))
		})}
	lf.add(list, true)

	var cf lbSpecFlags
	var key string
	create := &cobra.Command{Use: "create NAME", Short: "Create a load balancer", Args: cobra.ExactArgs(1),
		RunE: action(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			spec, err := cf.spec()
			if err != nil {
				return err
			}
			spec.Name = args[0]
			var opts []client.CallOption
			if key != "" {
				opts = append(opts, client.WithIdempotencyKey(key))
			}
			lb, err := c.CreateLoadBalancer(ctx, spec, opts...)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), lb, lbHeader, lbRows([]api.LoadBalancer{*lb}))
		})}
	cf.add(create)
	create.Flags().StringVar(&key, "idempotency-key", "", "Idempotency-Key: a retry with the same key creates nothing new")

	var uf lbSpecFlags
	update := &cobra.Command{Use: "update ID", Short: "Replace a load balancer's listeners, targets, health check, source ranges and tags", Args: cobra.ExactArgs(1),
		RunE: action(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			spec, err := uf.spec()
			if err != nil {
				return err
			}
			lb, err := c.UpdateLoadBalancer(ctx, args[0], spec)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), lb, lbHeader, lbRows([]api.LoadBalancer{*lb}))
		})}
	uf.add(update)

	get := &cobra.Command{Use: "get ID", Short: "Show a load balancer", Args: cobra.ExactArgs(1),
		RunE: action(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			lb, err := c.GetLoadBalancer(ctx, args[0])
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), lb, lbHeader, lbRows([]api.LoadBalancer{*lb}))
		})}
	del := &cobra.Command{Use: "delete ID...", Short: "Delete load balancers", Args: cobra.MinimumNArgs(1),
		RunE: eachID(f, "deleted", func(ctx context.Context, c *client.Client, id string) error { return c.DeleteLoadBalancer(ctx, id) })}
	cmd.AddCommand(list, create, update, get, del)
	return cmd
}

// ---- routes

var routeHeader = []string{"ID", "DESTINATION", "TARGET", "STATE", "TAGS", "AGE"}

func routeRows(items []api.Route) [][]string {
	rows := make([][]string, len(items))
	for i, r := range items {
		rows[i] = []string{r.ID, r.DestinationCIDR, r.TargetInstanceID, r.State, formatTags(r.Tags), age(r.CreatedAt)}
	}
	return rows
}

func newRoutesCommand() *cobra.Command {
	cmd, f := group("routes", "Create, list and delete routes", "route")

	var lf listFlags
	list := &cobra.Command{Use: "list", Short: "List routes", Args: cobra.NoArgs,
		RunE: action(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, _ []string) error {
			o, err := lf.options()
			if err != nil {
				return err
			}
			items, err := c.ListRoutes(ctx, o)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), items, routeHeader, routeRows(items))
		})}
	lf.add(list, false)

	var in api.RouteCreate
	var tags []string
	create := &cobra.Command{Use: "create DESTINATION_CIDR INSTANCE_ID", Short: "Route a CIDR to an instance", Args: cobra.ExactArgs(2),
		RunE: action(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			in.DestinationCIDR, in.TargetInstanceID = args[0], args[1]
			var err error
			if in.Tags, err = parseTags(tags, false); err != nil {
				return err
			}
			r, err := c.CreateRoute(ctx, in)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), r, routeHeader, routeRows([]api.Route{*r}))
		})}
	create.Flags().StringSliceVar(&tags, "tag", nil, "tag KEY=VALUE (repeatable)")
	del := &cobra.Command{Use: "delete ID...", Short: "Delete routes", Args: cobra.MinimumNArgs(1),
		RunE: eachID(f, "deleted", func(ctx context.Context, c *client.Client, id string) error { return c.DeleteRoute(ctx, id) })}
	cmd.AddCommand(list, create, del)
	return cmd
}

// ---- operations

func newStatsCommand() *cobra.Command {
	var reset, mine bool
	cmd, f := group("stats", "Show request counts per operation (--reset to zero them)")
	cmd.Args = cobra.NoArgs
	cmd.Flags().BoolVar(&reset, "reset", false, "zero the counts after showing them")
	cmd.Flags().BoolVar(&mine, "mine", false, "only the requests made with this token")
	cmd.RunE = action(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, _ []string) error {
		get := c.Stats
		if mine {
			get = c.TokenStats
		}
		st, err := get(ctx)
		if err != nil {
			return err
		}
		var rows [][]string
		for op, n := range st.Requests {
			rows = append(rows, []string{op, strconv.FormatInt(n, 10), strconv.FormatInt(st.ThrottledByOperation[op], 10)})
		}
		sortRows(rows)
		rows = append(rows, []string{"TOTAL", strconv.FormatInt(st.Total, 10), strconv.FormatInt(st.Throttled, 10)})
		if err := f.print(cmd.OutOrStdout(), st, []string{"OPERATION", "REQUESTS", "THROTTLED"}, rows); err != nil {
			return err
		}
		if reset {
			return c.ResetStats(ctx)
		}
		return nil
	})
	return cmd
}

func newFaultsCommand() *cobra.Command {
	cmd, f := group("faults", "Show or set injected faults (errors, throttling, latency)")
	header := []string{"ERROR RATE", "THROTTLE RATE", "UNAUTHORIZED RATE", "LATENCY MS", "OPERATIONS", "HOLD PROVISIONING"}
	row := func(fl *api.Faults) [][]string {
		rate := func(r float64) string { return strconv.FormatFloat(r, 'g', -1, 64) }
		return [][]string{{rate(fl.ErrorRate), rate(fl.ThrottleRate), rate(fl.UnauthorizedRate), strconv.Itoa(fl.LatencyMS), orDash(strings.Join(fl.Operations, ",")), strconv.FormatBool(fl.HoldProvisioning)}}
	}
	get := &cobra.Command{Use: "get", Short: "Show injected faults", Args: cobra.NoArgs,
		RunE: action(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, _ []string) error {
			fl, err := c.Faults(ctx)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), fl, header, row(fl))
		})}
	var in api.Faults
	set := &cobra.Command{Use: "set", Short: "Replace injected faults (no flags clears them)", Args: cobra.NoArgs,
		RunE: action(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, _ []string) error {
			fl, err := c.SetFaults(ctx, in)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), fl, header, row(fl))
		})}
	set.Flags().Float64Var(&in.ErrorRate, "error-rate", 0, "fraction of requests answered 500")
	set.Flags().Float64Var(&in.ThrottleRate, "throttle-rate", 0, "fraction of requests answered 429")
	set.Flags().Float64Var(&in.UnauthorizedRate, "unauthorized-rate", 0, "fraction of requests answered 401 (the token rejected)")
	set.Flags().IntVar(&in.LatencyMS, "latency-ms", 0, "added latency per request")
	set.Flags().StringSliceVar(&in.Operations, "op", nil, `only these operations, e.g. "GET /v1/instances" (repeatable)`)
	set.Flags().BoolVar(&in.HoldProvisioning, "hold-provisioning", false, "keep load balancers provisioning until the faults are cleared (a provisioning that never completes)")
	cmd.AddCommand(get, set)
	return cmd
}
