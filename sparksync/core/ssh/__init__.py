"""SSH to the nodes: pairing, unpairing, one reused transport per node, and tunnels.

- ``hostkeys``: the pinned-host-key policy (never trust a key silently).
- ``authorized_keys``: pure edits of an authorized_keys file.
- ``connection``: dial, handshake, authenticate, run a command; clear errors.
- ``remote_keys``: apply those edits on a node, under a lock, atomically.
- ``pairing`` / ``unpair``: the two halves of a node's membership.
- ``transports`` / ``tunnel``: live links to paired nodes and port forwards;
- ``client_key``: this client's one ed25519 key, its passphrase in the keyring;
- ``secrets``: the only caller of keyring;
- ``config_export``: an OpenSSH config and known_hosts from the pinned keys.
"""
