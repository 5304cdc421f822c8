// Package deploy holds no code: it is the deployment of serpent on a
// 3-node NATS cluster (docker-compose.yml, the NATS config files under
// nats/ and a Dockerfile), and the test that runs those same NATS config
// files in-process with serpent engines on them, so the deployment is
// exercised by go test where Docker is not available.
package deploy
