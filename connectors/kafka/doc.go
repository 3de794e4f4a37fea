// Package kafka is gofl's Apache Kafka connector on franz-go: a source on
// the Source API (package stream/source) and a sink with at-least-once and
// exactly-once (Kafka transactions) delivery, as Flink's KafkaSource and
// KafkaSink.
package kafka
