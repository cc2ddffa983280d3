#!/bin/bash
# zkServer.sh of the local zookeeper image (.ci/install-docker): only
# "start-foreground", as the official image's command, on the Debian
# package's jars (servlet-api for the AdminServer on 8080); logs go to
# stderr (slf4j-simple). JVMFLAGS and ZK_SERVER_HEAP (MB) work as in the
# official script.
set -euo pipefail
if [[ "${1:-}" != start-foreground ]]; then
	echo "zkServer.sh: only start-foreground is supported here" >&2
	exit 2
fi
exec java "-Xmx${ZK_SERVER_HEAP:-1000}m" ${JVMFLAGS:-} \
	-Dzookeeper.log.dir="$ZOO_LOG_DIR" -Dorg.slf4j.simpleLogger.showDateTime=true \
	-cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar:/usr/share/java/servlet-api.jar \
	org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZOO_CONF_DIR/zoo.cfg"
