import CoatyCore
import Testing

@testable import CoatyModel

/// The parser reads plain string text eight bytes at a time (`JSONParser.scanPlainString`); these
/// tests hold it to the rules read byte by byte, for each kind of byte that ends or breaks a string
/// at every offset of strings up to 40 bytes long, when parsing and when only validating (the
/// member index of a received object).
@Suite("JSON strings read eight bytes at a time")
struct JSONStringScanTests {
    /// What reading `content` between quotes (closed or not) gives, byte by byte: the string, or
    /// the error and its offset in the whole text (its opening quote at 0).
    private func expected(_ content: [UInt8], closed: Bool) -> Result<String, JSONParseError> {
        var i = 0
        var plain = true
        while i < content.count {
            let byte = content[i]
            if byte == UInt8(ascii: "\\") {
                plain = false
                break
            }
            if byte < 0x20 { return .failure(JSONParseError(.controlCharacterInString, at: 1 + i)) }
            i += 1
        }
        if plain && !closed { return .failure(JSONParseError(.unexpectedEnd, at: 1 + content.count)) }
        if !plain {
            // Only `\n` is used below: the reference decodes it.
            var bytes: [UInt8] = []
            var j = 0
            while j < content.count {
                if content[j] == UInt8(ascii: "\\") {
                    bytes.append(0x0A)
                    j += 2
                    continue
                }
                if content[j] < 0x20 { return .failure(JSONParseError(.controlCharacterInString, at: 1 + j)) }
                bytes.append(content[j])
                j += 1
            }
            if !closed { return .failure(JSONParseError(.unexpectedEnd, at: 1 + content.count)) }
            guard let text = String(validating: bytes, as: UTF8.self) else {
                return .failure(JSONParseError(.invalidUTF8, at: 1))
            }
            return .success(text)
        }
        guard let text = String(validating: content, as: UTF8.self) else {
            return .failure(JSONParseError(.invalidUTF8, at: 1))
        }
        return .success(text)
    }

    private func parsed(_ text: [UInt8]) -> Result<String, JSONParseError> {
        Result { () throws(JSONParseError) -> String in
            guard case .string(let string) = try JSONValue(parsing: text) else { return "<not a string>" }
            return string
        }
    }

    /// Validates `{"k":<string>}` as a received object's member index does (`skipString`).
    private func indexed(_ string: [UInt8]) -> Result<Void, JSONParseError> {
        let text = Array(#"{"k":"#.utf8) + string + Array("}".utf8)
        return text.withUnsafeBufferPointer { buffer in
            Result { () throws(JSONParseError) in
                var parser = JSONParser(reading: buffer.baseAddress!, count: buffer.count, maximumDepth: 8)
                var members: [JSONMemberLocation] = []
                _ = try parser.indexObject(into: &members)
            }
        }
    }

    @Test("a quote, backslash, control byte, non-ASCII or invalid UTF-8 at every offset, and no closing quote")
    func everyOffset() {
        let breakers: [[UInt8]] = [
            [UInt8(ascii: "\\"), UInt8(ascii: "n")], [0x01], [0x1F], [0x7F], [0xC3, 0xA9], [0xE2, 0x82, 0xAC],
            [0xFF], [0xC3], [0x20], [0x21], [0x23], [0x5B], [0x5D], [0x80],
        ]
        var checked = 0
        for length in 0...40 {
            let plain = [UInt8](repeating: UInt8(ascii: "a"), count: length)
            var contents = [plain]
            for offset in 0...length {
                for breaker in breakers {
                    contents.append(Array(plain[..<offset]) + breaker + Array(plain[offset...]))
                }
            }
            for content in contents {
                for closed in [true, false] {
                    let text = [UInt8(ascii: "\"")] + content + (closed ? [UInt8(ascii: "\"")] : [])
                    let want = expected(content, closed: closed)
                    let got = parsed(text)
                    #expect(got == want, "\(content) closed: \(closed)")
                    switch (indexed(text), want) {
                    case (.success, .success): break
                    case (.failure(let error), .failure(let wanted)):
                        // Offsets in the object text: five bytes of `{"k":` before the string.
                        #expect(error.reason == wanted.reason, "\(content) closed: \(closed)")
                        if wanted.reason != .unexpectedEnd {
                            #expect(error.offset == wanted.offset + 5, "\(content) closed: \(closed)")
                        }
                    case (let a, let b): Issue.record("validation \(a) differs from parsing \(b) for \(content)")
                    }
                    checked += 1
                }
            }
        }
        #expect(checked > 20_000)
    }

    @Test("a word of plain text recognised exactly: each special byte in each lane")
    func wordTest() {
        let plain = UInt64(0x6161_6161_6161_6161)
        #expect(!JSONParser.mayEndPlainString(plain))
        #expect(!JSONParser.mayEndPlainString(0xFFFE_8020_7E5D_5B23))
        for lane in 0..<8 {
            for byte: UInt64 in [0x22, 0x5C, 0x00, 0x01, 0x1F] {
                let word = plain & ~(0xFF << (8 * lane)) | (byte << (8 * lane))
                #expect(JSONParser.mayEndPlainString(word), "byte \(byte) in lane \(lane)")
            }
            for byte: UInt64 in [0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7F, 0x80, 0xA2, 0xDC, 0xFF] {
                let word = plain & ~(0xFF << (8 * lane)) | (byte << (8 * lane))
                #expect(!JSONParser.mayEndPlainString(word), "byte \(byte) in lane \(lane)")
            }
        }
    }
}
