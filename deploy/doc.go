// Package deploy holds no code: it holds what the repository's
// docker-compose.yml runs serpent on a 3-node NATS cluster with (the NATS
// config files under nats/ and a Dockerfile), and the test that runs
// those same NATS config files in-process with serpent engines on them,
// so the deployment is exercised by go test where Docker is not
// available.
package deploy
