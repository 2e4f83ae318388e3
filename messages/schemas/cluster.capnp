@0x82d9f77928d040ae;
# Rendezvous: what a node tells the head's coordinator when it joins, and the plan the
# coordinator sends back once every node of the manifest has joined; after a node is lost
# (faults.policy "elastic"), the survivors join again for the next generation and get its plan.
# Field numbers are the wire contract: add fields at the end, never renumber.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("troupe::schema");

struct WorkerEndpoints {
  rings @0 :List(Data);        # the transport address of this worker's reducer for ring r
}

struct JoinRequest {
  protocolVersion @0 :UInt32;  # CLUSTER_PROTOCOL_VERSION of the sender
  node @1 :Text;               # the node's name in the manifest
  manifestHash @2 :UInt64;     # xxh64 of the manifest as the node parsed it
  configHash @3 :UInt64;       # xxh64 of the job config as the node parsed it
  workers @4 :List(WorkerEndpoints);  # one per worker of the node, in worker order
  generation @5 :UInt64;       # the membership generation the node joins (0: the job's start)
  committedSteps @6 :Int64;    # optimizer steps its workers have completed (the most of any)
  restarted @7 :Bool;          # a restarted node: admitted into the next generation, state copied to it
  secret @8 :Data;             # the job's secret (TROUPE_JOB_SECRET, from the launcher); empty without one
  ncclIds @9 :List(Data);      # transport "nccl": one 128-byte ncclUniqueId per ring, made by this node
                               # (whose process then hosts that ring's NCCL bootstrap); empty otherwise
  probePort @10 :UInt16;       # the UDP port the node answers link probes on (io/comm/link_probe.hpp)
  incarnation @11 :UInt64;     # random per node process: its heartbeat datagrams carry it
                               # (io/comm/heartbeat_datagram.hpp)
  standby @12 :List(WorkerEndpoints);  # transports opened for the generation after this one
                               # (as workers), or empty; also what a member sends alone, with its
                               # committed steps, after it took a plan that came with the news of
                               # a loss (docs/faults.md#membership-generations)
  toForming @13 :Bool;         # a node that followed the head's role to a new holder: it joins
                               # the generation that holder forms, whichever it is (generation 0)
}

struct RingOrder {
  ranks @0 :List(UInt32);      # global ranks in ring order; rank i sends to ranks[i+1]
}

struct ClusterPlan {
  protocolVersion @0 :UInt32;
  world @1 :UInt32;            # workers over all nodes
  rings @2 :List(RingOrder);
  chunkBytes @3 :UInt64;       # pipeline chunk of the ring allreduce
  endpoints @4 :List(WorkerEndpoints);  # indexed by global rank
  generation @5 :UInt64;       # bumped each time the coordinator re-plans without a lost node
  members @6 :List(PlanMember);  # the nodes of this generation, in rank order
  startSteps @7 :Int64;        # generations after the first: the step every replica starts from
  ncclIds @8 :List(Data);      # transport "nccl": ring r's ncclUniqueId, those of the node holding rank 0
  autoRings @9 :UInt32;        # > 0: the ring orders are cluster::auto_ring_orders(world, autoRings)
                               # and `rings` is empty (a member derives them instead of reading 4
                               # bytes per rank per ring)
  partial @10 :Bool;           # one member's view (cluster::encode_member_plans): `members` lists only
                               # the members it needs (itself, the holders of its ranks' ring
                               # neighbours), `endpoints` is empty and `rankEndpoints` has those ranks'
  rankEndpoints @11 :List(RankEndpoints);
  electors @12 :List(Text);    # with failover: the electorate's voters beside the head that sent the
                               # plan (cluster/electorate.hpp), as it writes them to etcd; else empty
  headTerm @13 :Int64;         # with failover: that head's etcd term (its key's create revision); else 0
}

struct RankEndpoints {
  rank @0 :UInt32;             # a global rank
  rings @1 :List(Data);        # its transport address for ring r
}

struct PlanMember {
  node @0 :Text;
  firstRank @1 :UInt32;        # global rank of the node's first worker
  workers @2 :UInt32;
  probePort @3 :UInt16;        # its link-probe port (JoinRequest.probePort)
}

# The head coordinator's membership state as a value (cluster/membership_state.hpp): what a
# standby head would have to hold to take over. Not sent anywhere yet; tests round-trip it.
struct MembershipState {
  phase @0 :UInt8;             # cluster::coordinator_phase: 0 forming, 1 training, 2 finishing,
                               # 3 released, 4 stopped, 5 ended
  generation @1 :UInt64;
  members @2 :List(Text);      # the nodes of this generation
  joins @3 :List(Data);        # this generation's joins, each an encoded JoinRequest (secret removed)
  plan @4 :List(PlanMember);   # the members of the plan that went out last, in rank order
  startSteps @5 :Int64;        # that plan's start step
  finished @6 :List(Text);     # members that finished this generation
  departed @7 :List(Text);     # finished members that disconnected after the release
  stopReason @8 :Text;         # why the job stopped (phase stopped)
}
