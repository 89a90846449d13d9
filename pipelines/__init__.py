"""Apache Beam jobs that turn raw data into the TFRecords the training code reads."""
