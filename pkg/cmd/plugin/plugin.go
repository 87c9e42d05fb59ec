// Package plugin is the kubectl mydb plugin: backups, restores, status and
// short-lived credentials of MyDatabases from the command line, with
// kubectl's own flags.
package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
)

// NewCommand returns "kubectl mydb" with its subcommands.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	cmd := &cobra.Command{
		Use:          "kubectl-mydb",
		Short:        "Connect to, back up, restore, switch over and inspect MyDatabases",
		SilenceUsage: true,
	}
	flags.AddFlags(cmd.PersistentFlags())
	o := &options{flags: flags, streams: streams}
	cmd.AddCommand(o.backupCommand(), o.backupsCommand(), o.connectCommand(), o.credentialsCommand(), o.clientCommand("mariadb", false),
		o.clientCommand("psql", true), o.restoreCommand(), o.statusCommand(), o.switchoverCommand(),
		o.hibernateCommand(true), o.hibernateCommand(false), o.restartCommand(), o.rotateCACommand())
	return cmd
}

type options struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
}

// client returns a mydb client and the namespace the flags select.
func (o *options) client() (clientset.Interface, string, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, "", err
	}
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", err
	}
	c, err := clientset.NewForConfig(cfg)
	return c, ns, err
}

func (o *options) backupCommand() *cobra.Command {
	var name, target string
	var waitFor time.Duration
	cmd := &cobra.Command{
		Use:   "backup DATABASE",
		Short: "Take a backup of a MyDatabase now (POST mydatabases/DATABASE/backup)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			req := &examplev1.MyDatabaseBackup{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: examplev1.MyDatabaseBackupSpec{Target: examplev1.BackupTarget(target)}}
			result, err := c.ExampleV1().MyDatabases(ns).Backup(cmd.Context(), args[0], req, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			fmt.Fprintf(o.streams.Out, "mydatabasebackup.example.com/%s created\n", result.Name)
			if waitFor <= 0 {
				return nil
			}
			return o.waitForBackup(cmd.Context(), c, ns, result.Name, waitFor)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "name of the backup (default: the database's name and a random suffix)")
	cmd.Flags().DurationVar(&waitFor, "wait", 0, "wait this long for the backup to finish")
	cmd.Flags().StringVar(&target, "target", "", "the instance to back up: Primary or PreferReplica (the default)")
	return cmd
}

func (o *options) switchoverCommand() *cobra.Command {
	var to string
	var dryRun, allowWriteLoss bool
	var waitFor time.Duration
	cmd := &cobra.Command{
		Use:   "switchover DATABASE [--to INSTANCE [--allow-write-loss]]",
		Short: "Move a MyDatabase's primary to a replica without losing a write (POST mydatabases/DATABASE/switchover)",
		Long: "Asks mydb to make INSTANCE (default: the most caught-up ready replica) the primary: the current primary stops taking " +
			"writes, the target catches up with it and is promoted, and the old primary follows it. With --allow-write-loss " +
			"(and --to), it forces a failover mydb holds back because a lost replica may have had acknowledged writes " +
			"INSTANCE lacks (condition PrimaryChange, reason FailoverWouldLoseWrites): INSTANCE is promoted and those writes are lost.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			opts := metav1.CreateOptions{}
			if dryRun {
				opts.DryRun = []string{metav1.DryRunAll}
			}
			req := &examplev1.MyDatabaseSwitchover{Spec: examplev1.MyDatabaseSwitchoverSpec{TargetInstance: to, AllowWriteLoss: allowWriteLoss}}
			result, err := c.ExampleV1().MyDatabases(ns).Switchover(cmd.Context(), args[0], req, opts)
			if err != nil {
				return err
			}
			suffix := ""
			if dryRun {
				suffix = " (dry run)"
			}
			fmt.Fprintf(o.streams.Out, "mydatabase.example.com/%s switching over from %s to %s%s\n", args[0], result.Status.OldPrimary, result.Status.NewPrimary, suffix)
			if dryRun || waitFor <= 0 {
				return nil
			}
			return o.waitForSwitchover(cmd.Context(), c, ns, args[0], result.Status.NewPrimary, waitFor)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the replica to promote (default: the most caught-up ready replica)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only check that the switchover would be accepted")
	cmd.Flags().BoolVar(&allowWriteLoss, "allow-write-loss", false, "force a held-back failover to --to, losing the writes only a lost replica had (needs the forcefailover verb on mydatabases)")
	cmd.Flags().DurationVar(&waitFor, "wait", 0, "wait this long for the switchover to finish")
	return cmd
}

func (o *options) waitForSwitchover(ctx context.Context, c clientset.Interface, ns, name, target string, timeout time.Duration) error {
	var db *examplev1.MyDatabase
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		db, err = c.ExampleV1().MyDatabases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return db.Status.TargetPrimary == db.Status.CurrentPrimary, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the switchover of %s: %w", name, err)
	}
	msg := ""
	for _, cond := range db.Status.Conditions {
		if cond.Type == examplev1.ConditionPrimaryChange {
			msg = cond.Message
		}
	}
	if db.Status.CurrentPrimary != target {
		return fmt.Errorf("the switchover of %s did not complete: %s", name, msg)
	}
	fmt.Fprintf(o.streams.Out, "mydatabase.example.com/%s: %s\n", name, msg)
	return nil
}

func (o *options) waitForBackup(ctx context.Context, c clientset.Interface, ns, name string, timeout time.Duration) error {
	var b *examplev1.MyDatabaseBackup
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		b, err = c.ExampleV1().MyDatabaseBackups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return b.Status.Phase == examplev1.BackupPhaseSucceeded || b.Status.Phase == examplev1.BackupPhaseFailed, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for backup %s: %w", name, err)
	}
	if b.Status.Phase == examplev1.BackupPhaseFailed {
		return fmt.Errorf("backup %s failed: %s", name, b.Status.Message)
	}
	fmt.Fprintf(o.streams.Out, "mydatabasebackup.example.com/%s succeeded: %s (%d bytes, sha256 %s, from %s)\n",
		name, b.Status.Location.URI(), b.Status.SizeBytes, b.Status.Checksum, b.Status.Instance)
	return nil
}

func (o *options) backupsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "backups DATABASE",
		Short: "List the backups of a MyDatabase, newest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			backups, err := listBackups(cmd.Context(), c, ns, args[0])
			if err != nil {
				return err
			}
			printBackups(o.streams.Out, backups)
			return nil
		},
	}
}

func listBackups(ctx context.Context, c clientset.Interface, ns, db string) ([]examplev1.MyDatabaseBackup, error) {
	list, err := c.ExampleV1().MyDatabaseBackups(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector(examplev1.FieldDatabaseName, db).String(),
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[j].CreationTimestamp.Before(&list.Items[i].CreationTimestamp)
	})
	return list.Items, nil
}

func printBackups(out io.Writer, backups []examplev1.MyDatabaseBackup) {
	w := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	fmt.Fprintln(w, "NAME\tSTATUS\tSTARTED\tCOMPLETED\tLOCATION")
	for _, b := range backups {
		phase := string(b.Status.Phase)
		if phase == "" {
			phase = string(examplev1.BackupPhasePending)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", b.Name, phase, ago(b.Status.StartTime), ago(b.Status.CompletionTime), orNone(b.Status.Location.URI()))
	}
	w.Flush()
}

func (o *options) restoreCommand() *cobra.Command {
	var to, database, at, lsn, gtid string
	var latest bool
	cmd := &cobra.Command{
		Use:   "restore {BACKUP | --database SOURCE} --to NEW-DATABASE [--time TIME | --lsn LSN | --gtid GTID | --latest]",
		Short: "Create a new MyDatabase that starts from a backup (or a point in time), shaped like the database backed up",
		Long: "Create a new MyDatabase with spec.restoreFrom set to BACKUP and the engine, version, storage and " +
			"resources of the backed-up database. With --time (RFC 3339), --lsn (PostgreSQL), --gtid (MariaDB, MySQL) or " +
			"--latest, it then replays the source's archived WAL or binary logs to that point (spec.restoreFrom.pointInTime; " +
			"a source with spec.backup.pointInTimeRecovery); with --database instead of BACKUP, mydb picks the newest backup of " +
			"that database that ended before the point. The original is never touched.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return fmt.Errorf("--to is required: restores create a new database")
			}
			if (len(args) == 1) == (database != "") {
				return fmt.Errorf("name a backup or --database, not both")
			}
			target, err := recoveryTarget(at, lsn, gtid, latest)
			if err != nil {
				return err
			}
			if database != "" && target == nil {
				return fmt.Errorf("--database needs --time, --lsn, --gtid or --latest: mydb picks the backup before that point")
			}
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			from := &examplev1.RestoreSource{DatabaseName: database, PointInTime: target}
			if len(args) == 1 {
				b, err := c.ExampleV1().MyDatabaseBackups(ns).Get(ctx, args[0], metav1.GetOptions{})
				if err != nil {
					return err
				}
				database, from.BackupName = b.Spec.DatabaseName, b.Name
				from.DatabaseName = ""
			}
			source, err := c.ExampleV1().MyDatabases(ns).Get(ctx, database, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("the backed-up database %q (its spec is copied; write the new MyDatabase by hand if it is gone): %w", database, err)
			}
			spec := *source.Spec.DeepCopy()
			spec.Backup, spec.Hibernate = nil, false
			spec.RestoreFrom = from
			db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: to}, Spec: spec}
			if _, err := c.ExampleV1().MyDatabases(ns).Create(ctx, db, metav1.CreateOptions{}); err != nil {
				return err
			}
			what := "backup " + from.BackupName
			if from.BackupName == "" {
				what = "a backup of " + database
			}
			if target != nil {
				what += ", replayed to " + describePoint(target)
			}
			fmt.Fprintf(o.streams.Out, "mydatabase.example.com/%s created from %s\n", to, what)
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "name of the new MyDatabase")
	cmd.Flags().StringVar(&database, "database", "", "the MyDatabase whose newest backup before the point mydb picks (with --time, --lsn or --latest)")
	cmd.Flags().StringVar(&at, "time", "", "replay the archive up to this moment, RFC 3339 (2026-12-05T14:06:59Z): PostgreSQL and MySQL every transaction committed then or before, MariaDB those begun in an earlier second")
	// The name the point-in-time issue asked for, kept as a synonym.
	cmd.Flags().StringVar(&at, "to-time", "", "the same as --time")
	_ = cmd.Flags().MarkHidden("to-time")
	cmd.Flags().StringVar(&lsn, "lsn", "", "replay the archive up to this log sequence number (PostgreSQL)")
	cmd.Flags().StringVar(&gtid, "gtid", "", "replay the binary logs up to and including this transaction (MariaDB 0-1-4711, MySQL source_uuid:4711)")
	cmd.Flags().BoolVar(&latest, "latest", false, "replay everything the archive holds")
	return cmd
}

// recoveryTarget is the point --time, --lsn or --latest name (nil: none).
func recoveryTarget(at, lsn, gtid string, latest bool) (*examplev1.RecoveryTarget, error) {
	set := 0
	for _, on := range []bool{at != "", lsn != "", gtid != "", latest} {
		if on {
			set++
		}
	}
	switch {
	case set == 0:
		return nil, nil
	case set > 1:
		return nil, fmt.Errorf("--time, --lsn, --gtid and --latest are exclusive")
	case at != "":
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return nil, fmt.Errorf("--time: %w", err)
		}
		return &examplev1.RecoveryTarget{Time: &metav1.Time{Time: t}}, nil
	case lsn != "":
		return &examplev1.RecoveryTarget{LSN: lsn}, nil
	case gtid != "":
		return &examplev1.RecoveryTarget{GTID: gtid}, nil
	}
	return &examplev1.RecoveryTarget{Latest: true}, nil
}

func describePoint(t *examplev1.RecoveryTarget) string {
	switch {
	case t.Time != nil:
		return t.Time.UTC().Format(time.RFC3339)
	case t.LSN != "":
		return "LSN " + t.LSN
	case t.GTID != "":
		return "GTID " + t.GTID
	}
	return "the end of its archive"
}

// hibernateCommand is hibernate (on) or wake: it sets spec.hibernate.
func (o *options) hibernateCommand(on bool) *cobra.Command {
	use, short := "hibernate DATABASE", "Stop every instance of a MyDatabase, keeping its volumes and credentials (spec.hibernate)"
	if !on {
		use, short = "wake DATABASE", "Start a hibernated MyDatabase again, with the primary it had"
	}
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			patch := fmt.Sprintf(`{"spec":{"hibernate":%t}}`, on)
			if _, err := c.ExampleV1().MyDatabases(ns).Patch(cmd.Context(), args[0], types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return err
			}
			verb := "hibernating"
			if !on {
				verb = "waking"
			}
			fmt.Fprintf(o.streams.Out, "mydatabase.example.com/%s %s (kubectl get mdb %s shows when it is done)\n", args[0], verb, args[0])
			return nil
		},
	}
}

// restartCommand asks for a rolling restart: it sets the database's
// restarted-at annotation, which the controller copies onto the pod
// template.
func (o *options) restartCommand() *cobra.Command {
	return o.annotateNowCommand("restart DATABASE",
		"Restart every instance of a MyDatabase, primary last: the replicas one at a time, then one switchover, then the old primary",
		names.RestartedAtAnnotation, func(db string) string {
			return fmt.Sprintf("mydatabase.example.com/%s restarting, primary last (kubectl get mdb %s: UP-TO-DATE)", db, db)
		})
}

// rotateCACommand asks for a new root CA: it sets the database's
// rotate-ca annotation, which starts a rotation without a restart.
func (o *options) rotateCACommand() *cobra.Command {
	return o.annotateNowCommand("rotate-ca DATABASE",
		"Replace a MyDatabase's root CA without a restart: the new root is trusted everywhere, then signs, then the old one is no longer trusted",
		names.RotateCAAnnotation, func(db string) string {
			return fmt.Sprintf("mydatabase.example.com/%s rotating its CA (kubectl mydb status %s shows where it is; "+
				"applications read the new bundle from Secret %s)", db, db, names.CABundleSecret(db))
		})
}

// annotateNowCommand asks the controller for something by setting
// annotation on the database to the time: a new value is a new request.
func (o *options) annotateNowCommand(use, short, annotation string, said func(db string) string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			at := time.Now().UTC().Format(time.RFC3339Nano)
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotation: at}}})
			if err != nil {
				return err
			}
			if _, err := c.ExampleV1().MyDatabases(ns).Patch(cmd.Context(), args[0], types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return err
			}
			fmt.Fprintln(o.streams.Out, said(args[0]))
			return nil
		},
	}
}

func (o *options) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status DATABASE",
		Short: "Show a MyDatabase's state, conditions and latest backups",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			db, err := c.ExampleV1().MyDatabases(ns).Get(cmd.Context(), args[0], metav1.GetOptions{})
			if err != nil {
				return err
			}
			out := o.streams.Out
			fmt.Fprintf(out, "Name:       %s/%s\n", db.Namespace, db.Name)
			fmt.Fprintf(out, "Engine:     %s %s\n", db.Spec.Engine, db.Spec.Version)
			fmt.Fprintf(out, "Replicas:   %d/%d ready, %d run the current template\n", db.Status.ReadyReplicas, ptrValue(db.Spec.Replicas), db.Status.UpdatedReplicas)
			fmt.Fprintf(out, "Storage:    %s per replica\n", db.Spec.StorageSize.String())
			fmt.Fprintf(out, "Endpoint:   %s\n", orNone(db.Status.Endpoint))
			fmt.Fprintf(out, "Generation: %d (observed %d)\n", db.Generation, db.Status.ObservedGeneration)
			if st := db.Status; st.CurrentPrimary != "" {
				primary := st.CurrentPrimary
				if st.TargetPrimary != "" && st.TargetPrimary != st.CurrentPrimary {
					what := map[string]string{examplev1.TargetPrimaryReasonForcedFailover: "forced failover",
						examplev1.TargetPrimaryReasonRollingUpdate: "switchover of a rolling update"}[st.TargetPrimaryReason]
					if what == "" {
						what = strings.ToLower(st.TargetPrimaryReason)
					}
					primary += fmt.Sprintf(" (%s to %s under way)", what, st.TargetPrimary)
				}
				fmt.Fprintf(out, "Primary:    %s\n", primary)
			}
			if len(db.Status.Instances) > 0 {
				fmt.Fprintln(out, "Instances:")
			}
			for _, in := range db.Status.Instances {
				ready, template := "ready", "current template"
				if !in.Ready {
					ready = "not ready"
				}
				if in.Revision != db.Status.UpdateRevision {
					template = "old template"
				}
				fmt.Fprintf(out, "  %-16s %-8s %-10s %-17s %s\n", in.Name, strings.ToLower(string(in.Role)), ready, template, in.Message)
			}
			if len(db.Status.Instances) > 0 {
				o.printFigures(cmd.Context(), db)
			}
			if db.Spec.Backup != nil {
				fmt.Fprintf(out, "Schedule:   %q, keeping %d\n", db.Spec.Backup.Schedule, ptrValue(db.Spec.Backup.Retention))
			}
			if r := db.Status.Recoverability; r != nil && r.LastRecoverableTime != nil {
				from := "the first backup after archiving began"
				if r.FirstRecoverableTime != nil {
					from = r.FirstRecoverableTime.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(out, "Recoverable: from %s to before %s (last archived %s, %d waiting)\n", from,
					r.LastRecoverableTime.UTC().Format(time.RFC3339), orNone(r.LastArchivedWAL), r.PendingWALFiles)
			}
			if ca := db.Status.CertificateAuthority; ca != nil {
				line := "root " + ca.Fingerprint
				if ca.NotAfter != nil {
					line += ", until " + ca.NotAfter.UTC().Format(time.RFC3339)
				}
				if ca.Rotation != "" {
					line += "; rotation " + ca.Rotation
					if ca.Message != "" {
						line += ": " + ca.Message
					}
				} else if ca.LastRotationTime != nil {
					line += "; last rotated " + ago(ca.LastRotationTime)
				}
				fmt.Fprintf(out, "CA:         %s\n", line)
			}
			printObjects(out, "Databases:", db.Status.Databases)
			printObjects(out, "Roles:", db.Status.Roles)
			fmt.Fprintln(out, "Conditions:")
			for _, c := range db.Status.Conditions {
				fmt.Fprintf(out, "  %-12s %-6s %-24s %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
			backups, err := listBackups(cmd.Context(), c, ns, db.Name)
			if err != nil {
				return err
			}
			if len(backups) > 5 {
				backups = backups[:5]
			}
			fmt.Fprintln(out, "Latest backups:")
			printBackups(out, backups)
			return nil
		},
	}
}

// printFigures prints each instance's live figures, read from its /metrics
// through kube-apiserver's pod proxy; an instance that cannot be read (no
// get on pods/proxy, or it does not answer) says why.
func (o *options) printFigures(ctx context.Context, db *examplev1.MyDatabase) {
	out := o.streams.Out
	fmt.Fprintln(out, "Live figures (each instance's /metrics, through the API server's pod proxy):")
	cfg, err := o.flags.ToRESTConfig()
	var kube kubernetes.Interface
	if err == nil {
		kube, err = kubernetes.NewForConfig(cfg)
	}
	for _, in := range db.Status.Instances {
		line := ""
		if err == nil {
			fams, ferr := instanceFigures(ctx, kube, db.Namespace, in.Name)
			if ferr != nil {
				line = "<unavailable: " + ferr.Error() + ">"
			} else {
				line = figuresLine(db.Spec.Engine, fams)
			}
		} else {
			line = "<unavailable: " + err.Error() + ">"
		}
		fmt.Fprintf(out, "  %-16s %s\n", in.Name, line)
	}
}

func ago(t *metav1.Time) string {
	if t == nil {
		return "<none>"
	}
	return duration.HumanDuration(time.Since(t.Time)) + " ago"
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "<none>"
	}
	return s
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// printObjects prints status.databases or status.roles, one a line.
func printObjects(out io.Writer, title string, objects []examplev1.ManagedObjectStatus) {
	if len(objects) == 0 {
		return
	}
	fmt.Fprintln(out, title)
	for _, o := range objects {
		line := fmt.Sprintf("  %-20s %-8s", o.Name, o.State)
		if o.PasswordSecretVersion != "" {
			line += " password of Secret version " + o.PasswordSecretVersion
		}
		if o.Message != "" {
			line += " " + o.Message
		}
		fmt.Fprintln(out, strings.TrimRight(line, " "))
	}
}
