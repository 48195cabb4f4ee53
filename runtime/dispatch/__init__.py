"""How the dispatch mode handles one op: binding its arguments, running it
(tracked by autograd or not), attaching its outputs' tangents, updating in
place. The mode itself (`DualMode`) is `dualgen.dispatch.mode`."""
