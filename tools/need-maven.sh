#!/usr/bin/env bash
# Java 17 and Maven from Debian's packages when missing: the managed Neo4j's build
# (neo4j-server/pom.xml) and the catalog embedders' fetch (tools/fetch-models.sh) use them.
set -euo pipefail
if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jdk-headless maven
fi
