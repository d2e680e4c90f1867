import AgentProcessTestSupport
import Foundation
import Testing

// The README's example, compiled: between the markers below stands the README's ```swift block
// (the test checks they agree line by line), wrapped in a function by the lines marked `wrapper`.
// README snippet begins
import CoatyKit

struct Light: CoatyObject {                      // the whole custom object type
    static let objectType = "com.example.Light"
    var objectId = CoatyUUID()
    var name: String
    var isOn: Bool
}

func readmeExample() async throws {  // wrapper
let agent = try CommunicationManager.mqtt(url: "mqtt://127.0.0.1:1883", identity: Identity(name: "lights"),
                                          registry: CoatyObjectRegistry([Light.self]))
let lights = try agent.observeAdvertise(Light.self)
try await agent.start()
try await agent.publishAdvertise(Light(name: "Desk", isOn: true))
for await event in lights { print(event.object.name, event.object.isOn) }   // typed: a Light
}  // wrapper
// README snippet ends

@Suite("README")
struct ReadmeSnippetTests {
    /// The lines of `text` between the line containing `begin` and the one containing `end` (``docSnippetLines``).
    static func lines(of text: some StringProtocol, from begin: String?, to end: String) -> [String] {
        docSnippetLines(of: text, from: begin, to: end)
    }

    @Test("The README's Swift example is the code compiled in this file")
    func readmeExampleCompiles() throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let source = try String(contentsOf: here, encoding: .utf8)
        // The README's Swift block that begins with the import (another one shows Package.swift lines).
        let opening = "```swift\nimport CoatyKit\n"
        let block = try #require(readme.range(of: opening), "README.md has no Swift block beginning with `import CoatyKit`")
        let example = ["import CoatyKit"] + Self.lines(of: readme[block.upperBound...], from: nil, to: "```")
        let compiled = Self.lines(of: source, from: "// README snippet " + "begins", to: "// README snippet " + "ends")
        #expect(!compiled.isEmpty)
        #expect(example == compiled, "README.md's example differs from ReadmeSnippetTests.swift: update both")
    }
}
