"""The demo's parts, shipped with the product: the demo merge-on-read table generator (``make demo``,
``icecompact demo``), the table DDL helper it uses, and the local S3 endpoint + Iceberg REST catalog of
``make demo-s3`` (SeaweedFS). Tests and benchmarks use them too; nothing here is a test double."""
