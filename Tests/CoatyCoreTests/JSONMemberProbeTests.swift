import CoatyCore
import Testing

@testable import CoatyModel

@Suite("JSON member probe")
struct JSONMemberProbeTests {
    func probe(_ key: String, _ text: String) -> JSONMemberProbe {
        var key = key
        var text = text
        return key.withUTF8 { key in
            text.withUTF8 { text in JSONMemberProbe.probe(UnsafeRawBufferPointer(key), in: UnsafeRawBufferPointer(text))
            }
        }
    }

    @Test func decidesWhatItCan() {
        #expect(probe("rank", #"{"rank":3}"#) == .integer(3))
        #expect(probe("rank", #" { "a" : "x" , "rank" : -2.5e1 } "#) == .real(-25))
        #expect(probe("rank", #"{"rank":1.0}"#) == .real(1))
        #expect(probe("rank", #"{"rank":-0}"#) == .real(-0.0))
        #expect(probe("rank", #"{"rank":9007199254740991}"#) == .integer(9_007_199_254_740_991))
        #expect(probe("rank", #"{"a":1}"#) == .missing)
        #expect(probe("rank", "{}") == .missing)
        #expect(probe("rank", #"{"ranking":1,"ran":2,"Rank":3}"#) == .missing)
        #expect(probe("rank", #"{"a":{"rank":1},"b":[{"rank":2}],"c":"\"rank\":3"}"#) == .missing)
        for other in [#""7""#, "true", "false", "null", "[1]", #"{"rank":1}"#, #""\u0031""#] {
            #expect(probe("rank", #"{"rank":\#(other),"z":0}"#) == .nonNumber, "\(other)")
        }
    }

    @Test func leavesTheRestUndecided() {
        // Numbers that are not exact as doubles, two members of the name, a key that might spell
        // it, texts that are not one JSON object.
        #expect(probe("rank", #"{"rank":9007199254740992}"#) == .undecided)
        #expect(probe("rank", #"{"rank":1e300}"#) == .undecided)
        #expect(probe("rank", #"{"rank":1,"rank":2}"#) == .undecided)
        #expect(probe("rank", #"{"r\u0061nk":1}"#) == .undecided)
        #expect(probe("rank", #"[{"rank":1}]"#) == .undecided)
        #expect(probe("rank", #"{"rank":1} x"#) == .undecided)
        #expect(probe("rank", #"{"rank":1"#) == .undecided)
        #expect(probe("rank", #"{"rank":01}"#) == .undecided)
        #expect(probe("rank", "") == .undecided)
        // An escaped key that is another name does not hide the member itself.
        #expect(probe("rank", #"{"r\u0061nk2":"x","rank":4}"#) == .integer(4))
    }

    /// Against the parser: for random objects, the probe's answer is the parsed member (a number
    /// equal as a double, a missing member missing, another value not a number) or undecided.
    @Test func agreesWithTheParser() throws {
        var random = SystemRandomNumberGenerator()
        let keys = ["rank", "ranks", "r", "x"]
        let values: [String] = [
            "1", "-7", "0.5", "-0", "1e3", "12345678901234567890", "9007199254740993", "\"rank\"", "true", "null",
            "[1,{\"rank\":2}]", "{\"rank\":3}", "\"a\\\"b\"", "2.5E-3",
        ]
        for _ in 0..<2000 {
            var members: [String] = []
            for _ in 0..<Int.random(in: 0...5, using: &random) {
                members.append("\"\(keys.randomElement(using: &random)!)\":\(values.randomElement(using: &random)!)")
            }
            let text = "{" + members.joined(separator: ",") + "}"
            let parsed = try JSONValue(parsing: text)
            let duplicates = members.filter { $0.hasPrefix("\"rank\":") }.count > 1
            switch probe("rank", text) {
            case .missing: #expect(parsed["rank"] == nil, "\(text)")
            case .integer(let value): #expect(parsed["rank"]?.doubleValue == Double(value), "\(text)")
            case .real(let value): #expect(parsed["rank"]?.doubleValue == value, "\(text)")
            case .nonNumber: #expect(parsed["rank"] != nil && parsed["rank"]?.doubleValue == nil, "\(text)")
            case .undecided:
                let big = parsed["rank"].map { ($0.doubleValue.map { abs($0) } ?? 0) >= JSONMemberProbe.exactLimit }
                #expect(duplicates || big == true, "\(text)")
            }
        }
    }
}
