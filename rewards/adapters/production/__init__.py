"""Production adapters of the ports: Redis (state store); Kafka and ClickHouse in their own modules."""
