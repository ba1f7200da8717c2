"""Who may do what: listeners' TLS and SASL, SCRAM credentials, ACLs and the authorizer (Kafka's
`security` and `authorizer` packages)."""
