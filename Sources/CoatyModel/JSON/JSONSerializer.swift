extension JSONValue {
    /// The compact UTF-8 JSON text of this value.
    ///
    /// Integers print without a fraction, floating-point numbers always with a fraction or an
    /// exponent (`1.0`, `1e+100`), so parsing the text gives back the same case. Non-finite numbers,
    /// which JSON cannot express, print as `null` (as JavaScript's `JSON.stringify` does).
    /// - Returns: the UTF-8 bytes.
    public func serializedBytes() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        JSONSerializer.write(self, to: &out)
        return out
    }

    /// The compact JSON text of this value; see ``serializedBytes()``.
    /// - Returns: the JSON text.
    public func serializedString() -> String {
        String(decoding: serializedBytes(), as: UTF8.self)
    }

    /// Appends the compact UTF-8 JSON text of this value to `buffer`.
    /// - Parameter buffer: the buffer to append to.
    public func serialize(into buffer: inout [UInt8]) {
        JSONSerializer.write(self, to: &buffer)
    }
}

extension JSONObject {
    /// The compact UTF-8 JSON text of this object, keys in order.
    /// - Returns: the UTF-8 bytes.
    public func serializedBytes() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        JSONSerializer.writeObject(self, to: &out)
        return out
    }
}

extension JSONValue: CustomStringConvertible {
    /// The compact JSON text.
    public var description: String { serializedString() }
}

extension JSONObject: CustomStringConvertible {
    /// The compact JSON text.
    public var description: String { String(decoding: serializedBytes(), as: UTF8.self) }
}

/// Writes JSON text into a byte buffer.
package enum JSONSerializer {
    package static func write(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null:
            appendLiteral("null", to: &out)
        case .bool(let b):
            appendLiteral(b ? "true" : "false", to: &out)
        case .int(let i):
            writeInt(i, to: &out)
        case .double(let d):
            writeDouble(d, to: &out)
        case .string(let s):
            writeString(s, to: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            var first = true
            for element in elements {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                write(element, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            writeObject(object, to: &out)
        }
    }

    package static func writeObject(_ object: JSONObject, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        let keys = object.keys
        let values = object.values
        for i in keys.indices {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            writeString(keys[i], to: &out)
            out.append(UInt8(ascii: ":"))
            write(values[i], to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    @inline(__always)
    private static func appendLiteral(_ literal: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    static func writeInt(_ value: Int64, to out: inout [UInt8]) {
        if value >= 0 && value < 10 {
            out.append(UInt8(ascii: "0") &+ UInt8(value))
            return
        }
        var magnitude = value.magnitude
        if value < 0 { out.append(UInt8(ascii: "-")) }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var n = 20
            repeat {
                n -= 1
                digits[n] = UInt8(ascii: "0") &+ UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude != 0
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[n..<20]))
        }
    }

    static func writeDouble(_ value: Double, to out: inout [UInt8]) {
        guard value.isFinite else {
            appendLiteral("null", to: &out)
            return
        }
        // Swift prints the shortest text that round-trips; it always has "." or "e" except for
        // the non-finite values excluded above, but check to keep the double form regardless.
        var text = value.description
        var hasMarker = false
        text.withUTF8 { utf8 in
            for byte in utf8 where byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
                hasMarker = true
                break
            }
            out.append(contentsOf: utf8)
        }
        if !hasMarker { appendLiteral(".0", to: &out) }
    }

    private static let hexDigits: StaticString = "0123456789abcdef"

    package static func writeString(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            var runStart = 0
            for i in 0..<utf8.count {
                let byte = utf8[i]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                if runStart < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<i])) }
                runStart = i + 1
                out.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""): out.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
                case 0x0A: out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(UInt8(ascii: "r"))
                case 0x09: out.append(UInt8(ascii: "t"))
                case 0x08: out.append(UInt8(ascii: "b"))
                case 0x0C: out.append(UInt8(ascii: "f"))
                default:
                    let hex = hexDigits.utf8Start
                    out.append(UInt8(ascii: "u"))
                    out.append(UInt8(ascii: "0"))
                    out.append(UInt8(ascii: "0"))
                    out.append(hex[Int(byte >> 4)])
                    out.append(hex[Int(byte & 0x0F)])
                }
            }
            if runStart < utf8.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
        }
        out.append(UInt8(ascii: "\""))
    }
}
