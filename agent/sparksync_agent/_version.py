"""The one place the SparkSync version and the protocol version are defined (client and agent share them).

No imports: ``sparksync-agent version`` and the supervisor read these without
loading the wire models (pydantic), which costs a node a third of a CPU second.
"""

__version__ = "0.1.0"

# 1.1: workloads, logs, engines; Sample.workloads; Snapshot.engines
# 1.2: the fabric: GET /v1/fabric (ports, cabling probe), POST /v1/fabric/apply and /rollback
# 1.3: models: /v1/models (list, roots, delete), receive/verify/finalize, reach, jobs (fetch, push)
# 1.4: TokensSource.slots_path, .decode_gauge, .busy_gauge (decode tokens/s while llama.cpp and SGLang
#      generate; their counters grow only when a request ends)
# 1.5: a resume point (since) the agent never produced is a 409 unknown_since (was 400;
#      clients accept both); every answer is declared in /openapi.json; a 405 names Allow.
#      The model requests carry their rules in the schema (names, users, hosts, revisions,
#      endpoints, absolute roots; integers and booleans are not coerced from each other), so
#      what breaks one is a 422 invalid_request, not a 400; a copy that will not fit is a
#      409 no_space (was 507); DELETE /v1/models/{name} never takes a name another models
#      route serves (jobs/..., roots, receive, verify, finalize, reach).
# 1.6: PushRequest.from_staging: a node passes on the files of a copy it is still receiving.
#      The schema says that such a push names its files and that a file path stays inside the
#      model's folder (a 422 when broken); a named file that is not there is a 404 no_file (was
#      400 bad_files). No client acted on either code, so the number stays.
PROTOCOL_VERSION = "1.6"
