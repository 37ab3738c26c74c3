"""Outside formats in and out: a Hugging Face config.json, the workbook, TOML (`kvreg apply` / `export`),
CSV (demand and fleet) and a copy to another database. Each reader checks its file within kvreg.core.limits
and writes through the app layer's validators."""
