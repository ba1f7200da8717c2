"""The group coordinator: classic and KIP-848 consumer groups and their offsets in
`__consumer_offsets`."""
