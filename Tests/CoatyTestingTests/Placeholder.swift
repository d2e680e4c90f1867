import CoatyTesting
import Testing

@Test func moduleLoads() {
    #expect(String(describing: CoatyTesting.self) == "CoatyTesting")
}
