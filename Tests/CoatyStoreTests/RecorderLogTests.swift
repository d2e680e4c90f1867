import Testing

@testable import CoatyStore
@testable import CoatyRecording

@Suite("Recorder log lines")
struct RecorderLogTests {
    struct HugeError: Error, CustomStringConvertible {
        var description: String { "statement failed:\n" + String(repeating: "SELECT x AND ", count: 100_000) }
    }

    @Test("an error is logged as one line of at most 300 characters and a count of the rest")
    func errorsAreBounded() {
        let line = CoatyRecorder.describe(HugeError())
        #expect(!line.contains("\n"))
        #expect(line.count < 340)
        #expect(line.hasPrefix("statement failed: SELECT x AND"))
        #expect(line.hasSuffix("more characters)"))
        #expect(CoatyRecorder.describe(HugeError()).count == line.count)
        struct Short: Error {}
        #expect(CoatyRecorder.describe(Short()) == "Short()")
    }
}
