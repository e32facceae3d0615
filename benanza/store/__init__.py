"""The performance database: its SQLite schema and every query (db), the packed form perfdb/ ships
(packed), the shipped and compressed databases unpacked into the cache (shipped), and which of a
database's systems a command reads (systems)."""
