package runtime

// Codec serializes the record values of one exchange for the network: the
// values of the DataStream[T] the exchange carries, encoded by T's typed
// codec. Timestamps travel beside the value (the network writer frames
// them). A Codec is safe for concurrent use.
type Codec interface {
	// Append appends the encoding of v to dst. It fails when v is not of
	// the exchange's type.
	Append(dst []byte, v any) ([]byte, error)
	// Decode decodes one whole value; the result does not alias src.
	Decode(src []byte) (any, error)
	// TypeName names the value type, for errors.
	TypeName() string
}
