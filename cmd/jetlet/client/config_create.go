package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
)

func newCreateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create configmap|secret",
		Short: "Create a ConfigMap, or a Secret sealed for its nodes, from literals and files (as kubectl create)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("create what? `jetlet create configmap NAME ...` or `jetlet create secret generic|docker-registry|tls NAME ...`")
		},
	}
	secret := &cobra.Command{
		Use:   "secret generic|docker-registry|tls",
		Short: "Create a Secret sealed for the nodes that use it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("create which secret? `jetlet create secret generic NAME ...`, `jetlet create secret docker-registry NAME ...` or `jetlet create secret tls NAME ...`")
		},
	}
	secret.AddCommand(newCreateSecretGenericCommand(), newCreateSecretDockerRegistryCommand(), newCreateSecretTLSCommand())
	cmd.AddCommand(newCreateConfigMapCommand(), secret)
	return cmd
}

// Values of --dry-run.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
)

// createFlags are the flags every create command takes.
type createFlags struct {
	client    clientFlags
	namespace string
	dryRun    string
	output    string
	timeout   time.Duration
}

func (f *createFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	f.client.register(fs)
	fs.StringVarP(&f.namespace, "namespace", "n", "default", "the namespace of the object")
	fs.StringVar(&f.dryRun, "dry-run", dryRunNone, "client: only print the object (with -o), store nothing")
	fs.Lookup("dry-run").NoOptDefVal = dryRunClient
	fs.StringVarP(&f.output, "output", "o", "", "json or yaml: print the object")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for NATS")
	completeOutput(cmd, outputJSON, outputYAML)
	cli.AnnotateEnv(fs)
}

func (f *createFlags) validate() error {
	if err := checkOutput(f.output, outputJSON, outputYAML); err != nil {
		return err
	}
	switch f.dryRun {
	case dryRunNone, dryRunClient:
	case "server":
		return fmt.Errorf("--dry-run=server: there is no API server to ask; use --dry-run=client")
	default:
		return fmt.Errorf("--dry-run %q: want none or client", f.dryRun)
	}
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout %s: must be positive", f.timeout)
	}
	return nil
}

// objectMeta is the metadata of the object a create command makes.
func (f *createFlags) objectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: f.namespace}
}

// create validates obj and stores it (a Secret sealed for each of nodes),
// refusing one that exists; with --dry-run=client it stores nothing and
// needs no NATS. -o prints the object, as kubectl does: a Secret's data in
// base64, on the user's own terminal.
func (f *createFlags) create(cmd *cobra.Command, cm *corev1.ConfigMap, s *corev1.Secret, nodes []string) error {
	obj, err := checkedConfig("command line", cm, s)
	if err != nil {
		return err
	}
	stdout := cmd.OutOrStdout()
	var writes []*configWrite
	if f.dryRun != dryRunClient {
		if writes, err = f.store(cmd, obj, nodes); err != nil {
			return err
		}
	}
	var printed any = cm
	if s != nil {
		printed = s
	}
	switch {
	case f.output == outputJSON:
		return printJSON(stdout, printed)
	case f.output == outputYAML:
		return printYAML(stdout, printed)
	case f.dryRun == dryRunClient:
		fmt.Fprintf(stdout, "%s created (dry run)\n", obj.label())
		return nil
	}
	return reportConfigWrites(stdout, cmd.ErrOrStderr(), writes, publishFlags{})
}

func (f *createFlags) store(cmd *cobra.Command, obj *configObject, nodes []string) ([]*configWrite, error) {
	c, err := connectClient(cmd, &f.client)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	writes, err := prepareConfigs(ctx, c, []*configObject{obj}, nodes, true)
	if err != nil {
		return nil, err
	}
	return writes, storeConfigs(ctx, c, writes)
}

// keySources are the --from-* flags of create configmap and create secret
// generic.
type keySources struct {
	files, literals, envFiles []string
}

func (s *keySources) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&s.files, "from-file", nil, "[KEY=]PATH: a key from a file (KEY defaults to its base name), or one per regular file of a directory (repeatable)")
	fs.StringArrayVar(&s.literals, "from-literal", nil, "KEY=VALUE: a key and its value (repeatable)")
	fs.StringArrayVar(&s.envFiles, "from-env-file", nil, "PATH: a key per KEY=VALUE line of a file (KEY alone: its value from the environment) (repeatable)")
}

// each hands add every key and value of the sources, in kubectl's order:
// files, literals, env files; a key given twice is an error. Its errors
// quote keys and paths, never a value, nor an argument or a line that does
// not parse (it may be one).
func (s *keySources) each(addOnce func(key string, value []byte)) error {
	seen := map[string]bool{}
	add := func(key string, value []byte) error {
		if seen[key] {
			return fmt.Errorf("key %q is given twice; each key may be given once", key)
		}
		seen[key] = true
		addOnce(key, value)
		return nil
	}
	for _, src := range s.files {
		if err := addFromFile(src, add); err != nil {
			return err
		}
	}
	for _, lit := range s.literals {
		key, value, ok := strings.Cut(lit, "=")
		if !ok || key == "" {
			return fmt.Errorf("--from-literal: an argument is not KEY=VALUE (it is not shown: it may hold a value)")
		}
		if err := add(key, []byte(value)); err != nil {
			return err
		}
	}
	for _, file := range s.envFiles {
		if err := addFromEnvFile(file, add); err != nil {
			return err
		}
	}
	return nil
}

// addFromFile adds the key of a --from-file source: [KEY=]PATH, or every
// regular file of a directory under its own name.
func addFromFile(src string, add func(string, []byte) error) error {
	key, file := path.Base(filepath.ToSlash(src)), src
	if strings.Contains(src, "=") {
		var ok bool
		key, file, ok = strings.Cut(src, "=")
		if !ok || key == "" || file == "" || strings.Contains(file, "=") {
			return fmt.Errorf("--from-file %q: want [KEY=]PATH", src)
		}
	}
	info, err := os.Stat(file)
	if err != nil {
		return fmt.Errorf("--from-file: %w", err)
	}
	if !info.IsDir() {
		return addFileKey(key, file, add)
	}
	if strings.Contains(src, "=") {
		return fmt.Errorf("--from-file %q: a directory gives each file its own key; it takes no KEY=", src)
	}
	entries, err := os.ReadDir(file)
	if err != nil {
		return fmt.Errorf("--from-file: %w", err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := addFileKey(e.Name(), filepath.Join(file, e.Name()), add); err != nil {
				return err
			}
		}
	}
	return nil
}

func addFileKey(key, file string, add func(string, []byte) error) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--from-file: %w", err)
	}
	return add(key, data)
}

// addFromEnvFile adds a key per line of an env file as kubectl reads it:
// KEY=VALUE, or KEY alone for the value of KEY in the environment; blank
// lines and # comments skipped; a UTF-8 byte order mark dropped.
func addFromEnvFile(file string, add func(string, []byte) error) error {
	info, err := os.Stat(file)
	if err != nil {
		return fmt.Errorf("--from-env-file: %w", err)
	}
	if info.IsDir() {
		return fmt.Errorf("--from-env-file %s: a directory; want a file", file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--from-env-file: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))))
	sc.Buffer(make([]byte, 64*1024), len(data)+1)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimLeftFunc(sc.Bytes(), unicode.IsSpace)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if !utf8.Valid(line) {
			return fmt.Errorf("--from-env-file %s, line %d: not UTF-8", file, n)
		}
		key, value, hasValue := strings.Cut(string(line), "=")
		if len(validation.IsEnvVarName(key)) > 0 {
			return fmt.Errorf("--from-env-file %s, line %d: not KEY=VALUE with KEY an environment variable name (the line is not shown: it may hold a value)", file, n)
		}
		if !hasValue {
			value = os.Getenv(key)
		}
		if err := add(key, []byte(value)); err != nil {
			return err
		}
	}
	return sc.Err()
}

func newCreateConfigMapCommand() *cobra.Command {
	var f createFlags
	var src keySources
	cmd := &cobra.Command{
		Use:     "configmap NAME [--from-file=[KEY=]PATH] [--from-literal=KEY=VALUE] [--from-env-file=PATH]",
		Aliases: []string{"cm"},
		Short:   "Create a ConfigMap in jetlet_configmaps from files, directories or literals",
		Long: `Create a ConfigMap as kubectl create configmap does, and put it to
jetlet_configmaps (key <namespace>.<name>). A file whose content is not UTF-8
goes to binaryData. It is refused when it exists (jetlet apply -f replaces
it). --dry-run=client -o yaml prints it without storing it.`,
		Example: `  jetlet create configmap app-config --from-literal=mode=prod --from-file=conf/
  jetlet create cm nginx -n web --from-file=nginx.conf=site.conf
  jetlet create configmap env --from-env-file=app.env --dry-run=client -o yaml > env.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			cm := &corev1.ConfigMap{ObjectMeta: f.objectMeta(args[0]), Data: map[string]string{}, BinaryData: map[string][]byte{}}
			err := src.each(func(key string, value []byte) {
				if utf8.Valid(value) {
					cm.Data[key] = string(value)
				} else {
					cm.BinaryData[key] = value
				}
			})
			if err != nil {
				return err
			}
			return f.create(cmd, cm, nil, nil)
		},
	}
	f.register(cmd)
	src.register(cmd.Flags())
	return cmd
}

// createSecretFlags are the flags of the create secret commands: --nodes
// besides --node, which every client command takes.
type createSecretFlags struct {
	createFlags
	nodes []string
}

func (f *createSecretFlags) register(cmd *cobra.Command) {
	f.createFlags.register(cmd)
	cmd.Flags().StringSliceVar(&f.nodes, "nodes", nil, "seal the Secret for each of these nodes (N1,N2); --node for one")
}

// validate checks the flags and returns the nodes to seal for.
func (f *createSecretFlags) validate() ([]string, error) {
	if err := f.createFlags.validate(); err != nil {
		return nil, err
	}
	return secretNodes(f.client.node, f.nodes)
}

func newCreateSecretGenericCommand() *cobra.Command {
	var f createSecretFlags
	var src keySources
	var typ string
	cmd := &cobra.Command{
		Use:   "generic NAME --node N|--nodes N1,N2 [--type T] [--from-file=[KEY=]PATH] [--from-literal=KEY=VALUE] [--from-env-file=PATH]",
		Short: "Create a Secret sealed for its nodes from files, directories or literals",
		Long: `Create a Secret as kubectl create secret generic does, seal it for each
node of --node or --nodes with the xkey of the node's record in jetlet_nodes,
and put it to jetlet_secrets (key <node>.<namespace>.<name>). A node with no
record stores nothing. It is refused when it exists on one of the nodes
(jetlet apply -f replaces it). --dry-run=client -o yaml prints it (data in
base64, as kubectl) without sealing or storing it.`,
		Example: `  jetlet create secret generic db --from-literal=password=s3cr3t --node n1
  jetlet create secret generic tls-files --from-file=certs/ --nodes n1,n2
  jetlet create secret generic db --from-env-file=db.env --dry-run=client -o yaml > db.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sealFor, err := f.validate()
			if err != nil {
				return err
			}
			s := &corev1.Secret{ObjectMeta: f.objectMeta(args[0]), Type: corev1.SecretType(typ), Data: map[string][]byte{}}
			if err := src.each(func(key string, value []byte) { s.Data[key] = value }); err != nil {
				return err
			}
			return f.create(cmd, nil, s, sealFor)
		},
	}
	f.register(cmd)
	src.register(cmd.Flags())
	cmd.Flags().StringVar(&typ, "type", "", "the Secret's type (default Opaque)")
	return cmd
}

// dockerConfigJSON is the content of a kubernetes.io/dockerconfigjson
// Secret: ~/.docker/config.json's auths.
type dockerConfigJSON struct {
	Auths map[string]dockerConfigEntry `json:"auths"`
}

type dockerConfigEntry struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Email    string `json:"email,omitempty"`
	Auth     string `json:"auth,omitempty"`
}

func newCreateSecretDockerRegistryCommand() *cobra.Command {
	var f createSecretFlags
	var server, user, password, email string
	cmd := &cobra.Command{
		Use:   "docker-registry NAME --docker-username U --docker-password P [--docker-server S] [--docker-email E] --node N|--nodes N1,N2",
		Short: "Create a kubernetes.io/dockerconfigjson Secret for imagePullSecrets, sealed for its nodes",
		Long: `Create a Secret of type kubernetes.io/dockerconfigjson as kubectl create
secret docker-registry does (key .dockerconfigjson: {"auths": {SERVER:
{username, password, email, auth}}}), seal it for each node of --node or
--nodes and put it to jetlet_secrets. Pods name it in imagePullSecrets.`,
		Example: `  jetlet create secret docker-registry regcred --docker-server=registry.example.com \
    --docker-username=ci --docker-password="$TOKEN" --node n1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sealFor, err := f.validate()
			if err != nil {
				return err
			}
			auth := dockerConfigEntry{Username: user, Password: password, Email: email,
				Auth: base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}
			content, err := json.Marshal(dockerConfigJSON{Auths: map[string]dockerConfigEntry{server: auth}})
			if err != nil {
				return fmt.Errorf("encode %s", corev1.DockerConfigJsonKey) // json's error may quote a value
			}
			s := &corev1.Secret{ObjectMeta: f.objectMeta(args[0]), Type: corev1.SecretTypeDockerConfigJson,
				Data: map[string][]byte{corev1.DockerConfigJsonKey: content}}
			return f.create(cmd, nil, s, sealFor)
		},
	}
	f.register(cmd)
	fs := cmd.Flags()
	fs.StringVar(&server, "docker-server", "https://index.docker.io/v1/", "the registry's server")
	fs.StringVar(&user, "docker-username", "", "the user name for the registry")
	fs.StringVar(&password, "docker-password", "", "the password (or token) for the registry")
	fs.StringVar(&email, "docker-email", "", "the email for the registry (optional)")
	_ = cmd.MarkFlagRequired("docker-username")
	_ = cmd.MarkFlagRequired("docker-password")
	return cmd
}

func newCreateSecretTLSCommand() *cobra.Command {
	var f createSecretFlags
	var certFile, keyFile string
	cmd := &cobra.Command{
		Use:   "tls NAME --cert PATH --key PATH --node N|--nodes N1,N2",
		Short: "Create a kubernetes.io/tls Secret from a certificate and its key, sealed for its nodes",
		Long: `Create a Secret of type kubernetes.io/tls as kubectl create secret tls
does: tls.crt from --cert and tls.key from --key (PEM), refused unless the
key is the certificate's (crypto/tls's X509KeyPair, as kubectl checks);
sealed for each node of --node or --nodes and put to jetlet_secrets.`,
		Example: `  jetlet create secret tls web-tls --cert tls.crt --key tls.key --node n1
  jetlet create secret tls web-tls -n shop --cert tls.crt --key tls.key --nodes n1,n2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sealFor, err := f.validate()
			if err != nil {
				return err
			}
			s, err := tlsSecret(f.objectMeta(args[0]), certFile, keyFile)
			if err != nil {
				return err
			}
			return f.create(cmd, nil, s, sealFor)
		},
	}
	f.register(cmd)
	fs := cmd.Flags()
	fs.StringVar(&certFile, "cert", "", "the PEM certificate (chain) file: tls.crt")
	fs.StringVar(&keyFile, "key", "", "the PEM private key file of the certificate: tls.key")
	_ = cmd.MarkFlagRequired("cert")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

// tlsSecret is the kubernetes.io/tls Secret of the certificate and key
// files, refused when the key is not the certificate's. Its errors name the
// files, never their content (crypto/tls's quote none).
func tlsSecret(meta metav1.ObjectMeta, certFile, keyFile string) (*corev1.Secret, error) {
	cert, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("--cert: %w", err)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		return nil, fmt.Errorf("--cert %s and --key %s are not a key pair: %w", certFile, keyFile, err)
	}
	return &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}}, nil
}
