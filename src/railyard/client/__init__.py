"""The client side of the REST API, standard library only: the HTTP client, the wire types,
the Slurm value spellings and the batch-script directives (parsed before anything is sent,
as sbatch does). It imports no other railyard package, so a ``railyard submit`` loads none of
the server, and the server may share its vocabulary (``tests/test_layers.py``).
"""
