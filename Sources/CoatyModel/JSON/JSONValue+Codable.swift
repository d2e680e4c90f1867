extension JSONValue: Codable {
    /// Decodes any JSON value.
    ///
    /// With ``JSONValueDecoder`` this takes the value as it is (key order and number form kept).
    /// With other decoders (such as Foundation's `JSONDecoder`) it probes the value's kind;
    /// object key order then follows that decoder.
    /// - Parameter decoder: the decoder.
    /// - Throws: `DecodingError` when the value is none of the JSON kinds.
    public init(from decoder: any Decoder) throws {
        if let ours = decoder as? ValueDecoder {
            self = ours.bytes.map { .object($0.object) } ?? ours.value
            return
        }
        if let container = try? decoder.container(keyedBy: JSONCodingKey.self) {
            var object = JSONObject()
            for key in container.allKeys {
                object[key.stringValue] = try container.decode(JSONValue.self, forKey: key)
            }
            self = .object(object)
            return
        }
        if var container = try? decoder.unkeyedContainer() {
            var elements: [JSONValue] = []
            if let count = container.count { elements.reserveCapacity(count) }
            while !container.isAtEnd {
                elements.append(try container.decode(JSONValue.self))
            }
            self = .array(elements)
            return
        }
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let b = try? container.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? container.decode(Int64.self) {
            self = .int(i)
        } else if let d = try? container.decode(Double.self) {
            self = .double(d)
        } else if let s = try? container.decode(String.self) {
            self = .string(s)
        } else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "Value is not representable as JSON")
            )
        }
    }

    /// Encodes this value exactly (key order, number form); `null` stays `null`.
    /// - Parameter encoder: the encoder.
    /// - Throws: whatever the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        if let ours = encoder as? ValueEncoder {
            ours.storage = .value(self)
            return
        }
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let b):
            var container = encoder.singleValueContainer()
            try container.encode(b)
        case .int(let i):
            var container = encoder.singleValueContainer()
            try container.encode(i)
        case .double(let d):
            var container = encoder.singleValueContainer()
            try container.encode(d)
        case .string(let s):
            var container = encoder.singleValueContainer()
            try container.encode(s)
        case .array(let elements):
            var container = encoder.unkeyedContainer()
            for element in elements { try container.encode(element) }
        case .object(let object):
            var container = encoder.container(keyedBy: JSONCodingKey.self)
            for (key, value) in object {
                try container.encode(value, forKey: JSONCodingKey(stringValue: key))
            }
        }
    }
}

extension JSONObject: Codable {
    /// Decodes a JSON object.
    /// - Parameter decoder: the decoder.
    /// - Throws: `DecodingError.typeMismatch` when the value is not an object.
    public init(from decoder: any Decoder) throws {
        let value = try JSONValue(from: decoder)
        guard case .object(let object) = value else {
            throw DecodingError.typeMismatch(
                JSONObject.self,
                .init(
                    codingPath: decoder.codingPath,
                    debugDescription: "Expected an object, found \(JSONValue.kindName(value))"
                )
            )
        }
        self = object
    }

    /// Encodes the object with its keys in order.
    /// - Parameter encoder: the encoder.
    /// - Throws: whatever the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        try JSONValue.object(self).encode(to: encoder)
    }
}
