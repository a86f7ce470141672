// Package natsjs is jetlet's access to NATS JetStream, what every reader and
// writer of it shares: the layout (the streams and buckets, their names and configs,
// provisioning), the fixed names of the consumers a node creates, the
// read-back consumers through which it reads what it stored, NATS
// permission errors, the trace context carried in message headers, and what
// the publishers of results, events and statuses share: the checks of their
// configs (Prepare), the Outbox the background ones publish through, and
// jetlet_publish_failures_total.
//
// Its parent, schemas, holds the wire types and subject names and imports
// no NATS; this package is where NATS comes in.
package natsjs
