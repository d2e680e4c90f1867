/// An RFC 4122 UUID as Coaty uses it: object ids, source ids, correlation ids.
///
/// Sixteen bytes held in two integers: cheap to copy, hash and compare. `CoatyUUID()` makes a
/// fresh random (version 4) UUID; the text form is lowercase `8-4-4-4-12` hex, and it is encoded
/// as that string.
///
/// ```swift
/// let id = CoatyUUID()
/// let same = CoatyUUID("\(id)")      // Optional(id)
/// CoatyUUID("not-a-uuid")            // nil
/// ```
public struct CoatyUUID: Sendable, Hashable, Comparable {
    /// The first eight bytes, big-endian.
    public let high: UInt64
    /// The last eight bytes, big-endian.
    public let low: UInt64

    /// A fresh random version 4 UUID from the system's cryptographic randomness.
    public init() {
        let (high, low) = UUIDEntropy.next()
        self.init(versionedHigh: high, low: low)
    }

    private init(versionedHigh high: UInt64, low: UInt64) {
        // Version 4 in the high nibble of byte 6, variant 10xx in byte 8.
        self.high = (high & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000
        self.low = (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
    }

    /// A random version 4 UUID drawn from `generator` (for reproducible tests).
    /// - Parameter generator: the source of randomness.
    public init(randomUsing generator: inout some RandomNumberGenerator) {
        let high = generator.next() as UInt64
        let low = generator.next() as UInt64
        self.init(versionedHigh: high, low: low)
    }

    /// A UUID from its two halves.
    /// - Parameters:
    ///   - high: the first eight bytes, big-endian.
    ///   - low: the last eight bytes, big-endian.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Parses the `8-4-4-4-12` hex form (either case); `nil` for anything else.
    /// - Parameter text: the UUID text.
    public init?(_ text: String) {
        var text = text
        guard let parsed = text.withUTF8({ CoatyUUID.parse(UnsafeRawBufferPointer($0)) }) else { return nil }
        self = parsed
    }

    /// Parses the `8-4-4-4-12` hex form (either case) from UTF-8 bytes.
    /// - Parameter utf8: exactly 36 bytes of UUID text.
    /// - Returns: the UUID, or `nil` when the bytes are not a UUID.
    public static func parse(_ utf8: UnsafeRawBufferPointer) -> CoatyUUID? {
        guard utf8.count == 36, let base = utf8.baseAddress else { return nil }
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        // The dashes first, then the 32 digits of the five groups, branch-free: every topic of a
        // request and its response carries two UUIDs, and a Discover's payload a third (the
        // byte loop with a range switch per byte cost ~430 instructions per UUID).
        guard bytes[8] == 0x2D, bytes[13] == 0x2D, bytes[18] == 0x2D, bytes[23] == 0x2D else { return nil }
        var invalid: UInt8 = 0
        @inline(__always) func digits(_ start: Int, _ count: Int, into value: inout UInt64) {
            for i in start..<(start + count) {
                let byte = bytes[i]
                let decimal = byte &- 0x30  // "0"…"9" -> 0…9
                let letter = (byte | 0x20) &- 0x61  // "a"…"f", "A"…"F" -> 0…5
                let isDecimal = decimal < 10
                let isLetter = letter < 6
                invalid |= (isDecimal || isLetter) ? 0 : 1
                value = value << 4 | UInt64(isDecimal ? decimal : letter &+ 10)
            }
        }
        var high: UInt64 = 0
        var low: UInt64 = 0
        digits(0, 8, into: &high)
        digits(9, 4, into: &high)
        digits(14, 4, into: &high)
        digits(19, 4, into: &low)
        digits(24, 12, into: &low)
        return invalid == 0 ? CoatyUUID(high: high, low: low) : nil
    }

    /// The lowercase `8-4-4-4-12` text form.
    public var uuidString: String {
        String(unsafeUninitializedCapacity: 36) { buffer in
            writeText(into: buffer)
            return 36
        }
    }

    /// Appends the text form in double quotes (a JSON string) to `out`, without making a `String`.
    package func appendQuoted(to out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 38) { buffer in
            buffer[0] = UInt8(ascii: "\"")
            writeText(into: UnsafeMutableBufferPointer(rebasing: buffer[1..<37]))
            buffer[37] = UInt8(ascii: "\"")
            out.append(contentsOf: buffer)
        }
    }

    /// Writes the 36 bytes of the text form to the start of `buffer`.
    @inline(__always)
    private func writeText(into buffer: UnsafeMutableBufferPointer<UInt8>) {
        let hex: StaticString = "0123456789abcdef"
        let digits = hex.utf8Start
        var out = 0
        for nibbleIndex in 0..<32 {
            if nibbleIndex == 8 || nibbleIndex == 12 || nibbleIndex == 16 || nibbleIndex == 20 {
                buffer[out] = UInt8(ascii: "-")
                out += 1
            }
            let word = nibbleIndex < 16 ? high : low
            let shift = UInt64(60 - (nibbleIndex % 16) * 4)
            buffer[out] = digits[Int((word >> shift) & 0xF)]
            out += 1
        }
    }

    /// The lowercase hex digits without dashes (32 characters).
    public var compactString: String {
        var s = uuidString
        s.removeAll { $0 == "-" }
        return s
    }

    /// The version number (4 for random UUIDs).
    public var version: Int { Int((high >> 12) & 0xF) }

    /// Orders by the 128-bit value.
    public static func < (lhs: CoatyUUID, rhs: CoatyUUID) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }
}

extension CoatyUUID: LosslessStringConvertible {
    /// The lowercase text form.
    public var description: String { uuidString }
}

extension CoatyUUID: Codable {
    /// Decodes the text form.
    /// - Parameter decoder: the decoder.
    /// - Throws: `DecodingError.dataCorrupted` when the string is not a UUID.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let uuid = CoatyUUID(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "Not a UUID: \"\(text)\"")
        }
        self = uuid
    }

    /// Encodes the lowercase text form.
    /// - Parameter encoder: the encoder.
    /// - Throws: whatever the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(uuidString)
    }
}
